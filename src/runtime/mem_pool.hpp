// A stream-ordered device memory pool of gpuxfer's own, for scratch space.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace gpuxfer::detail {

/// A stream-ordered memory pool of one device that keeps up to @p keep_bytes of freed memory mapped, so
/// that repeated cudaMallocFromPoolAsync calls of scratch space cost no mapping (the device's default
/// pool gives memory back to the OS at every synchronisation, and gpuxfer leaves the default alone).
class MemPool {
 public:
  /// @throws Error when the pool cannot be created
  MemPool(int device, std::size_t keep_bytes);
  ~MemPool();
  MemPool(const MemPool&) = delete;
  MemPool& operator=(const MemPool&) = delete;

  [[nodiscard]] cudaMemPool_t get() const noexcept { return pool_; }

 private:
  int device_ = -1;
  cudaMemPool_t pool_ = nullptr;
};

}  // namespace gpuxfer::detail
