#include <gpuxfer/detail/device_guard.hpp>

#include <string>

#include <cuda_runtime_api.h>

#include "runtime/cuda_check.hpp"
#include "runtime/driver_api.hpp"

namespace gpuxfer::detail {

int DeviceGuard::enter(int device) noexcept {
  CUctx_st* before = nullptr;
  const bool known = current_context(before) == 0;
  // Set even when the device looks current already: on a thread that has made no CUDA call yet this is
  // what makes the device's context current, which driver calls (cuMemGetAddressRange) need, and a
  // context the caller created on the device is not the primary one our streams belong to.
  const cudaError_t err = handled(cudaSetDevice(device));
  if (err != cudaSuccess) return err;
  entered_ = true;
  CUctx_st* now = nullptr;
  // Without the driver's answer the context stays as cudaSetDevice left it (the CUDA 11 behaviour).
  if (known && current_context(now) == 0) {
    previous_ = before;
    restore_ = before != now;
  }
  return cudaSuccess;
}

DeviceGuard::DeviceGuard(int device) {
  if (const int err = enter(device); err != cudaSuccess) {
    throw_cuda(static_cast<cudaError_t>(err), "cudaSetDevice(device)", __FILE__, __LINE__,
               "device ordinal " + std::to_string(device));
  }
}

DeviceGuard::DeviceGuard(int device, std::nothrow_t) noexcept { (void)enter(device); }

DeviceGuard::~DeviceGuard() {
  if (restore_) (void)set_current_context(previous_);
}

HostContextGuard::HostContextGuard(int device) noexcept {
  CUctx_st* current = nullptr;
  if (current_context(current) == 0 && current != nullptr) return;
  enter_primary(device);
}

HostContextGuard::HostContextGuard(int device, PrimaryOnly) noexcept { enter_primary(device); }

void HostContextGuard::enter_primary(int device) noexcept {
  if (device < 0) {
    int count = 0;
    if (handled(cudaGetDeviceCount(&count)) != cudaSuccess) count = 0;
    for (int i = 0; i < count && device < 0; ++i) {
      if (primary_context_active(i)) device = i;
    }
  }
  if (device < 0 && handled(cudaGetDevice(&device)) != cudaSuccess) return;
  guard_.emplace(device, std::nothrow);
}

}  // namespace gpuxfer::detail
