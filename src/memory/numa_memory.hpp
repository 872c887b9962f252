// Pinned host memory whose pages live on a chosen NUMA node: mapped, bound to the node (mbind) before
// anything touches it, then page-locked for every device (cudaHostRegister, portable). Staging on the
// node its GPU hangs off keeps the copy engines' and the copy threads' traffic off the inter-socket link.
#pragma once

#include <cstddef>

namespace gpuxfer::detail {

/// @p bytes of pinned memory on NUMA node @p node.
/// @throws Error(Errc::out_of_memory) when the host cannot map or lock it; Error(Errc::invalid_argument)
///         for a node the kernel does not know; Error(Errc::no_device / cuda_error) when CUDA cannot register it
[[nodiscard]] std::byte* allocate_on_node(std::size_t bytes, int node);

/// Unregisters and unmaps memory from allocate_on_node. Never throws.
void free_on_node(std::byte* block, std::size_t bytes) noexcept;

/// The NUMA node the page holding @p ptr lives on now (move_pages), or a negative errno.
[[nodiscard]] int node_of_page(const void* ptr) noexcept;

}  // namespace gpuxfer::detail
