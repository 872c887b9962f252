/// @file buffer_ranges.hpp
/// @brief Byte ranges that operations take and return: a registered buffer, a device slice, the place of
/// one device's bytes in a concatenated gather.
#pragma once

#include <cstddef>

namespace gpuxfer {

/// Where one device's bytes landed in a concatenated gather.
struct GatherPiece {
  std::size_t device = 0;  ///< device index
  std::size_t offset = 0;  ///< byte offset in the destination
  std::size_t size = 0;    ///< bytes
};

/// A byte range of one device's memory, for gather_slices.
struct DeviceSlice {
  std::size_t device = 0;     ///< device index
  const void* ptr = nullptr;  ///< device memory of that device
  std::size_t size = 0;       ///< bytes
};

/// What InterGpuTransfer::device_buffer reports: the buffer registered on a device.
struct RegisteredBuffer {
  void* ptr = nullptr;     ///< device memory of that device
  std::size_t size = 0;    ///< bytes
};

}  // namespace gpuxfer
