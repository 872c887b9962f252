#include "memory/host_memory.hpp"

#include <cstddef>

#include <cuda_runtime_api.h>

namespace gpuxfer::detail {

bool is_pinned(const void* ptr) noexcept {
  if (ptr == nullptr) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

bool is_pinned_range(const void* ptr, std::size_t bytes) noexcept {
  return bytes > 0 && is_pinned(ptr) && is_pinned(static_cast<const std::byte*>(ptr) + bytes - 1);
}

}  // namespace gpuxfer::detail
