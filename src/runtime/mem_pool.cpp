#include "runtime/mem_pool.hpp"

#include <cstdint>
#include <string>

#include <gpuxfer/detail/device_guard.hpp>

#include "runtime/capture_mode.hpp"
#include "runtime/cuda_check.hpp"

namespace gpuxfer::detail {

MemPool::MemPool(int device, std::size_t keep_bytes) : device_(device) {
  DeviceGuard guard(device);  // a thread without a context must not get device 0's
  const RelaxedCapture relaxed;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  GPUXFER_CUDA_TRY_CTX(cudaMemPoolCreate(&pool_, &props), "creating a scratch memory pool on ordinal " + std::to_string(device));
  std::uint64_t threshold = keep_bytes;
  const cudaError_t err = cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold);
  if (err != cudaSuccess) {
    (void)handled(cudaMemPoolDestroy(pool_));
    GPUXFER_CUDA_TRY_CTX(err, "setting the scratch pool's release threshold");
  }
}

MemPool::~MemPool() {
  if (pool_ == nullptr) return;
  const DeviceGuard guard(device_, std::nothrow);
  const RelaxedCapture relaxed;
  (void)handled(cudaMemPoolDestroy(pool_));
}

}  // namespace gpuxfer::detail
