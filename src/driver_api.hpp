// The few CUDA driver API calls gpuxfer needs, reached through cudaGetDriverEntryPointByVersion so that
// nothing links libcuda directly.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpuxfer::detail {

/// The allocation that contains @p ptr.
struct AddressRange {
  std::uintptr_t base = 0;
  std::size_t size = 0;
};

/// cuMemGetAddressRange for @p ptr; false when the driver knows no allocation at that address (freed,
/// host memory) or the entry point is unavailable.
[[nodiscard]] bool address_range(const void* ptr, AddressRange& out) noexcept;

}  // namespace gpuxfer::detail
