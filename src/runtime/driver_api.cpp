#include "runtime/driver_api.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

namespace gpuxfer::detail {
namespace {

PFN_cuMemGetAddressRange_v3020 load_get_address_range() noexcept {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &status) !=
          cudaSuccess ||
      status != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<PFN_cuMemGetAddressRange_v3020>(fn);
}

}  // namespace

int address_range(const void* ptr, AddressRange& out) noexcept {
  static const PFN_cuMemGetAddressRange_v3020 get_range = load_get_address_range();
  if (get_range == nullptr) return -1;
  CUdeviceptr base = 0;
  size_t size = 0;
  const CUresult result = get_range(&base, &size, reinterpret_cast<CUdeviceptr>(ptr));
  if (result != CUDA_SUCCESS) return static_cast<int>(result);
  out.base = static_cast<std::uintptr_t>(base);
  out.size = size;
  return 0;
}

}  // namespace gpuxfer::detail
