#include "node/pointer_checks.hpp"

#include <cstdio>
#include <string>

#include <cuda_runtime_api.h>

#include <gpuxfer/detail/device_guard.hpp>
#include <gpuxfer/error.hpp>

#include "runtime/capture_mode.hpp"
#include "runtime/cuda_check.hpp"

namespace gpuxfer::detail {
namespace {

std::string describe(const void* ptr, std::size_t size) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", ptr);
  return std::string("pointer ") + text + " (" + std::to_string(size) + " bytes)";
}

// The managed devices whose context reports a sticky error now ("device 0, device 1"). A fault on one
// device reaches every device it shares peer mappings with (seen on the 2 x H200 runner), so the device
// where an operation notices it need not be the one that faulted: name them all.
std::string faulted_devices(const ManagerState& m) {
  std::string names;
  for (std::size_t i = 0; i < m.size(); ++i) {
    const DeviceGuard guard(m.ordinal(i), std::nothrow);
    const RelaxedCapture relaxed;
    if (guard.entered() && is_sticky(handled(cudaStreamQuery(m.streams_of(i).d2d.get())))) {
      names += (names.empty() ? "" : ", ") + device_name(m, i);
    }
  }
  return names;
}

// A sticky driver error (the device faulted) is reported as such, not as a bad pointer.
void throw_if_faulted(const ManagerState& m, int result, const std::string& who) {
  if (result > 0 && is_sticky(static_cast<cudaError_t>(result))) {
    const std::string reporting = faulted_devices(m);
    throw Error(Errc::device_fault,
                who + ": the device has faulted (driver error " + std::to_string(result) + ", " +
                    cudaGetErrorName(static_cast<cudaError_t>(result)) + ")" +
                    (reporting.empty() ? std::string{} : "; the fault is reported on " + reporting) +
                    "; the process must reset its devices");
  }
}

}  // namespace

AddressRange validate_device_range(const ManagerState& m, std::size_t index, const void* ptr,
                                   std::size_t size, const char* what) {
  check_index(m, index, what);
  const std::string who = std::string(what) + " on " + device_name(m, index) + ": " + describe(ptr, size);
  if (ptr == nullptr) throw Error(Errc::invalid_buffer, who + " is null");
  DeviceGuard guard(m.ordinal(index));  // cudaPointerGetAttributes and the driver need a current context
  cudaPointerAttributes attr{};
  const cudaError_t err = handled(cudaPointerGetAttributes(&attr, ptr));
  if (err != cudaSuccess) {
    throw Error(err == cudaErrorInvalidValue ? Errc::invalid_buffer : errc_for(err),
                who + ": cudaPointerGetAttributes failed: " + cudaGetErrorName(err));
  }
  if (attr.type == cudaMemoryTypeHost) throw Error(Errc::invalid_buffer, who + " is pinned host memory, not device memory");
  if (attr.type == cudaMemoryTypeUnregistered) {
    throw Error(Errc::invalid_buffer, who + " is not memory CUDA knows (pageable host memory, or freed)");
  }
  if (attr.device != m.ordinal(index)) {
    throw Error(Errc::invalid_buffer, who + " belongs to CUDA ordinal " + std::to_string(attr.device) +
                                          ", not " + std::to_string(m.ordinal(index)));
  }
  AddressRange range;
  if (const int result = address_range(ptr, range); result != 0) {
    throw_if_faulted(m, result, who);
    throw Error(Errc::invalid_buffer, who + ": the driver knows no allocation at this address");
  }
  const auto begin = reinterpret_cast<std::uintptr_t>(ptr);
  const std::size_t room = range.base + range.size - begin;
  if (size > room) {
    throw Error(Errc::invalid_buffer, who + " passes the end of its allocation: only " + std::to_string(room) +
                                          " bytes from the pointer to the end");
  }
  return range;
}

void check_still_allocated(const ManagerState& m, std::size_t index, const void* ptr, std::size_t size,
                           const AddressRange& allocation) {
  AddressRange now;
  DeviceGuard guard(m.ordinal(index));
  const int result = address_range(ptr, now);
  throw_if_faulted(m, result, "the buffer registered on " + device_name(m, index));
  if (result != 0 || now.base != allocation.base || now.size != allocation.size) {
    throw Error(Errc::invalid_buffer, "the buffer registered on " + device_name(m, index) + " (" +
                                          describe(ptr, size) +
                                          ") was freed or reallocated since set_device_buffer; register it again");
  }
}

}  // namespace gpuxfer::detail
