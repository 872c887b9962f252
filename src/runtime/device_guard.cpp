#include "runtime/device_guard.hpp"

#include <string>

#include <cuda_runtime_api.h>

#include "runtime/cuda_check.hpp"

namespace gpuxfer::detail {

DeviceGuard::DeviceGuard(int device) {
  GPUXFER_CUDA_TRY(cudaGetDevice(&previous_));
  // Set even when it is already the current device: on a thread that has made no CUDA call yet this is
  // what makes the device's context current, which driver calls (cuMemGetAddressRange) need.
  GPUXFER_CUDA_TRY_CTX(cudaSetDevice(device), "device ordinal " + std::to_string(device));
  switched_ = previous_ != device;
}

DeviceGuard::~DeviceGuard() {
  if (switched_) (void)cudaSetDevice(previous_);
}

}  // namespace gpuxfer::detail
