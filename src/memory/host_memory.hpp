// What kind of host memory a pointer is: the copy engines DMA page-locked memory directly, anything else
// goes through pinned staging.
#pragma once

#include <cstddef>

namespace gpuxfer::detail {

/// True when @p ptr is page-locked host memory (cudaHostAlloc or cudaHostRegister).
[[nodiscard]] bool is_pinned(const void* ptr) noexcept;

/// True when the whole of [@p ptr, @p ptr + @p bytes) is page-locked, so that one DMA may touch it all:
/// a register_host registration holds it, or a pinned allocation the driver knows the extent of does.
[[nodiscard]] bool is_pinned_range(const void* ptr, std::size_t bytes) noexcept;

/// True when the current device reaches every byte of [@p ptr, @p ptr + @p bytes) at its own address (as
/// unified addressing maps cudaHostAlloc'd memory, and registered memory where the device can use host
/// pointers for it), so that a kernel on it may load and store those bytes. One driver query per 4 KiB
/// page: meant for small ranges.
[[nodiscard]] bool device_maps_pinned_range(const void* ptr, std::size_t bytes) noexcept;

}  // namespace gpuxfer::detail
