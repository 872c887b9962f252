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

/// cuMemGetAddressRange for @p ptr (the caller makes the pointer's device current). Returns the driver's
/// CUresult: 0 on success; an error when the driver knows no allocation at that address (freed, host
/// memory) or the device has faulted (the sticky codes equal the runtime's: 700 illegal address, ...);
/// -1 when the entry point is unavailable.
[[nodiscard]] int address_range(const void* ptr, AddressRange& out) noexcept;

}  // namespace gpuxfer::detail
