// Checks that a device pointer is what the caller says it is, and the naming of devices that faulted.
#pragma once

#include <cstddef>

#include "node/manager_state.hpp"
#include "runtime/driver_api.hpp"

namespace gpuxfer::detail {

/// Checks that [ptr, ptr + size) is device memory of device @p index and returns its allocation.
/// @p what names the argument in messages.
/// @throws Error(Errc::invalid_buffer); Error(Errc::device_fault) naming every faulted device
[[nodiscard]] AddressRange validate_device_range(const ManagerState& m, std::size_t index, const void* ptr,
                                                 std::size_t size, const char* what);

/// Throws Error(Errc::invalid_buffer) when @p allocation, which held the buffer [ptr, ptr + size)
/// registered on device @p index, has been freed (or replaced) since; Error(Errc::device_fault) when the
/// device faulted.
void check_still_allocated(const ManagerState& m, std::size_t index, const void* ptr, std::size_t size,
                           const AddressRange& allocation);

}  // namespace gpuxfer::detail
