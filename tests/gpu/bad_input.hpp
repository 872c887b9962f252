// The bad-input tables of the GPU tests (test_bad_input.cpp): what their rows may use, and the parts of
// the tables, one file a concept (registration and the manager, copies and broadcasts, gathers, two
// devices); the zero-size rows are in test_bad_input.cpp with the fixture.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/bad_input.hpp"
#include "common/paths.hpp"
#include "gpu/fixture.hpp"

namespace gpuxfer::test {

inline constexpr std::size_t kAlloc = 2 * kMiB;  // allocations: a multiple of the 2 MiB granularity
inline constexpr std::size_t kRegistered = 64 * kKiB + 3;

// What a row may use. Device i has a buffer of registered(i) bytes (device 0's the smallest) at the start
// of an allocation of kAlloc bytes, filled with the test's pattern for i; spare(i) is an unregistered
// allocation of kAlloc bytes, output(i) one of kAlloc * devices bytes, freed(i) the address of an
// allocation freed after everything else was allocated.
struct GpuWorld {
  MultiGpuManager* manager = nullptr;
  InterGpuTransfer* xfer = nullptr;
  std::size_t count = 0;
  std::vector<std::byte*> buffer;  // the registered buffers
  std::vector<std::size_t> size;   // their registered sizes
  std::vector<std::byte*> spare;
  std::vector<std::byte*> output;
  std::vector<std::byte*> freed;
  std::vector<int> ordinal;
  std::vector<cudaStream_t> stream;  // a non-blocking stream of each device
  std::span<std::byte> pinned;       // 1 MiB of pinned host memory
  std::vector<std::byte> pageable = std::vector<std::byte>(kAlloc, std::byte{7});
  // Allocates, registers and frees a buffer of @p bytes on @p device: a registration gone stale.
  std::function<void(std::size_t device, std::size_t bytes)> register_freed;

  [[nodiscard]] std::size_t last() const { return count - 1; }
  [[nodiscard]] std::size_t total() const {
    std::size_t sum = 0;
    for (const std::size_t s : size) sum += s;
    return sum;
  }
  [[nodiscard]] std::span<const std::byte> data(std::size_t bytes) const {
    return std::span(pageable).first(bytes);
  }
};

using GpuRow = Row<GpuWorld>;

/// What an out-of-range index's message says: the argument, the index and the device count.
inline Texts index_texts(const std::string& what, std::size_t index, std::size_t count) {
  return {what + " index " + n(index) + " is out of range", "the manager has " + n(count) + " device"};
}

/// set_device_buffer, clear_device_buffer and device_buffer (bad_input_registry_rows.cpp).
std::vector<GpuRow> registry_rows();
/// MultiGpuManager and its pool (bad_input_registry_rows.cpp).
std::vector<GpuRow> manager_rows();
/// copy_buffer, copy_device_buffer, broadcast and broadcast_from_device (bad_input_copy_rows.cpp).
std::vector<GpuRow> copy_rows();
/// gather, gather_blocking, gather_all, gather_into, gather_slices, gather_to_device
/// (bad_input_gather_rows.cpp).
std::vector<GpuRow> gather_rows();
/// The rows that need two devices (bad_input_multi_rows.cpp).
std::vector<GpuRow> multi_rows();

}  // namespace gpuxfer::test
