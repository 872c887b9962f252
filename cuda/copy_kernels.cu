// Byte copies through the SMs, 16-byte loads and stores where source and destination are both aligned:
// packing many small device ranges into one buffer so that one DMA moves them all (a block per piece), and
// one small contiguous copy (a grid-strided loop). Launched through cudaLaunchKernel, whose status is the
// launch's own (cudaGetLastError after a <<<>>> launch would also return an error left by earlier calls).
#include "cuda/copy_kernels.hpp"

namespace gpuxfer::detail {
namespace {

constexpr unsigned pack_threads = 256;
constexpr unsigned copy_threads = 256;
constexpr std::size_t copy_bytes_per_block = 4096;  // one 16-byte vector per thread
constexpr std::size_t copy_max_blocks = 64;

// Copies @p size bytes from @p src to @p dst, shared by @p threads threads of which this is @p thread.
__device__ void copy_range(unsigned char* dst, const unsigned char* src, std::uint64_t size,
                           std::uint64_t thread, std::uint64_t threads) {
  std::uint64_t done = 0;
  if (((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) & 15) == 0) {
    const std::uint64_t vectors = size / 16;
    const auto* s = reinterpret_cast<const uint4*>(src);
    auto* d = reinterpret_cast<uint4*>(dst);
    for (std::uint64_t i = thread; i < vectors; i += threads) d[i] = s[i];
    done = vectors * 16;
  }
  for (std::uint64_t i = done + thread; i < size; i += threads) dst[i] = src[i];
}

__global__ void pack_kernel(const PackItem* items, unsigned char* packed) {
  const PackItem item = items[blockIdx.x];
  copy_range(packed + item.offset, static_cast<const unsigned char*>(item.src), item.size, threadIdx.x,
             blockDim.x);
}

__global__ void copy_kernel(unsigned char* dst, const unsigned char* src, std::uint64_t size) {
  copy_range(dst, src, size, static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
             static_cast<std::uint64_t>(gridDim.x) * blockDim.x);
}

}  // namespace

cudaError_t load_copy_kernels() {
  cudaFuncAttributes attributes{};
  for (const void* kernel :
       {reinterpret_cast<const void*>(&pack_kernel), reinterpret_cast<const void*>(&copy_kernel)}) {
    if (const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel); err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t launch_pack(const PackItem* items, std::size_t count, void* packed, cudaStream_t stream) {
  // The grid's x dimension takes up to 2^31 - 1 blocks: far more pieces than anyone packs at once.
  auto* out = static_cast<unsigned char*>(packed);
  void* args[] = {&items, &out};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&pack_kernel), dim3(static_cast<unsigned>(count)),
                          dim3(pack_threads), args, 0, stream);
}

cudaError_t launch_copy(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  const std::size_t wanted = (bytes + copy_bytes_per_block - 1) / copy_bytes_per_block;
  const auto blocks = static_cast<unsigned>(wanted < copy_max_blocks ? wanted : copy_max_blocks);
  auto* to = static_cast<unsigned char*>(dst);
  const auto* from = static_cast<const unsigned char*>(src);
  std::uint64_t size = bytes;
  void* args[] = {&to, &from, &size};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&copy_kernel), dim3(blocks), dim3(copy_threads), args,
                          0, stream);
}

}  // namespace gpuxfer::detail
