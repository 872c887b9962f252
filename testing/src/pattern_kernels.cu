// Pattern fill and verify on the GPU: used by the tests, `gpuxfer check` and the benchmark, so that
// 256 MiB buffers are made and checked in milliseconds.
#include "pattern_kernels.hpp"
#include "pattern_mix.hpp"

namespace gpuxfer::pattern::detail {
namespace {

constexpr unsigned threads_per_block = 256;

unsigned blocks_for(std::size_t words) {
  const std::size_t blocks = (words + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(blocks < 4096 ? (blocks == 0 ? 1 : blocks) : 4096);
}

// Thread t writes the bytes of pattern words t, t + stride, ... that fall in [offset, offset + bytes).
__global__ void fill_kernel(unsigned char* dst, std::size_t bytes, std::uint64_t seed, std::uint64_t offset) {
  const std::uint64_t first_word = offset >> 3;
  const std::uint64_t last_word = (offset + bytes + 7) >> 3;
  for (std::uint64_t w = first_word + blockIdx.x * blockDim.x + threadIdx.x; w < last_word;
       w += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t word = pattern_word(seed, w);
    for (unsigned b = 0; b < 8; ++b) {
      const std::uint64_t index = w * 8 + b;
      if (index >= offset && index < offset + bytes) dst[index - offset] = static_cast<unsigned char>(word >> (8 * b));
    }
  }
}

__global__ void count_kernel(const unsigned char* data, std::size_t bytes, std::uint64_t seed, std::uint64_t offset,
                             unsigned long long* wrong) {
  const std::uint64_t first_word = offset >> 3;
  const std::uint64_t last_word = (offset + bytes + 7) >> 3;
  unsigned long long mine = 0;
  for (std::uint64_t w = first_word + blockIdx.x * blockDim.x + threadIdx.x; w < last_word;
       w += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t word = pattern_word(seed, w);
    for (unsigned b = 0; b < 8; ++b) {
      const std::uint64_t index = w * 8 + b;
      if (index >= offset && index < offset + bytes) {
        mine += data[index - offset] != static_cast<unsigned char>(word >> (8 * b));
      }
    }
  }
  if (mine != 0) atomicAdd(wrong, mine);
}

__global__ void spin_kernel(std::uint64_t spin_ns) {
  std::uint64_t start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    std::uint64_t now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= spin_ns) break;
    __nanosleep(1000);
  }
}

std::size_t words_of(std::size_t bytes, std::uint64_t offset) { return ((offset + bytes + 7) >> 3) - (offset >> 3); }

}  // namespace

cudaError_t launch_pattern_fill(void* dst, std::size_t bytes, std::uint64_t seed, std::uint64_t offset,
                                cudaStream_t stream) {
  fill_kernel<<<blocks_for(words_of(bytes, offset)), threads_per_block, 0, stream>>>(static_cast<unsigned char*>(dst),
                                                                                     bytes, seed, offset);
  return cudaGetLastError();
}

cudaError_t launch_pattern_count(const void* data, std::size_t bytes, std::uint64_t seed, std::uint64_t offset,
                                 unsigned long long* wrong, cudaStream_t stream) {
  count_kernel<<<blocks_for(words_of(bytes, offset)), threads_per_block, 0, stream>>>(
      static_cast<const unsigned char*>(data), bytes, seed, offset, wrong);
  return cudaGetLastError();
}

cudaError_t launch_spin(std::uint64_t spin_ns, cudaStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>(spin_ns);
  return cudaGetLastError();
}

}  // namespace gpuxfer::pattern::detail
