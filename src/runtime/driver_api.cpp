#include "runtime/driver_api.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "runtime/cuda_check.hpp"

namespace gpuxfer::detail {
namespace {

// The entry point @p name in the ABI of CUDA @p version (the version its PFN type is suffixed with), or
// nullptr when the driver lacks it.
template <class Fn>
Fn load(const char* name, unsigned version) noexcept {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  // A symbol the driver lacks is a status, not an error: nothing to clear then.
  if (handled(cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &status)) != cudaSuccess ||
      status != cudaDriverEntryPointSuccess) {
    return nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

}  // namespace

int address_range(const void* ptr, AddressRange& out) noexcept {
  static const auto get_range = load<PFN_cuMemGetAddressRange_v3020>("cuMemGetAddressRange", 3020);
  if (get_range == nullptr) return -1;
  CUdeviceptr base = 0;
  size_t size = 0;
  const CUresult result = get_range(&base, &size, reinterpret_cast<CUdeviceptr>(ptr));
  if (result != CUDA_SUCCESS) return static_cast<int>(result);
  out.base = static_cast<std::uintptr_t>(base);
  out.size = size;
  return 0;
}

int current_context(CUctx_st*& out) noexcept {
  static const auto get_current = load<PFN_cuCtxGetCurrent_v4000>("cuCtxGetCurrent", 4000);
  out = nullptr;
  if (get_current == nullptr) return -1;
  return static_cast<int>(get_current(&out));
}

int set_current_context(CUctx_st* context) noexcept {
  static const auto set_current = load<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent", 4000);
  if (set_current == nullptr) return -1;
  return static_cast<int>(set_current(context));
}

int exchange_capture_mode(int& mode) noexcept {
  static const auto exchange =
      load<PFN_cuThreadExchangeStreamCaptureMode_v10010>("cuThreadExchangeStreamCaptureMode", 10010);
  if (exchange == nullptr) return -1;
  auto driver_mode = static_cast<CUstreamCaptureMode>(mode);
  const CUresult result = exchange(&driver_mode);
  if (result == CUDA_SUCCESS) mode = static_cast<int>(driver_mode);
  return static_cast<int>(result);
}

bool primary_context_active(int ordinal) noexcept {
  static const auto get_device = load<PFN_cuDeviceGet_v2000>("cuDeviceGet", 2000);
  static const auto get_state =
      load<PFN_cuDevicePrimaryCtxGetState_v7000>("cuDevicePrimaryCtxGetState", 7000);
  if (get_device == nullptr || get_state == nullptr) return false;
  CUdevice device = 0;
  unsigned flags = 0;
  int active = 0;
  return get_device(&device, ordinal) == CUDA_SUCCESS && get_state(device, &flags, &active) == CUDA_SUCCESS &&
         active != 0;
}

}  // namespace gpuxfer::detail
