#include "gate_kernel.hpp"

namespace gpuxfer::bench {
namespace {

__device__ unsigned long long global_ns() {
  unsigned long long now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

// The timeout keeps a host that blocks while queueing (so never releases the gate) from hanging the run:
// the kernel gives up and says so, and the measurement is reported as failed.
__global__ void gate_kernel(const volatile int* release, volatile int* timed_out,
                            unsigned long long timeout_ns) {
  const unsigned long long start = global_ns();
  while (*release == 0) {
    if (global_ns() - start > timeout_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(500);
  }
}

__global__ void vector_copy(uint4* dst, const uint4* src, std::size_t vectors) {
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors;
       i += step)
    dst[i] = src[i];
}

}  // namespace

cudaError_t launch_gate(const volatile int* release, volatile int* timed_out, unsigned long long timeout_ns,
                        cudaStream_t stream) {
  gate_kernel<<<1, 1, 0, stream>>>(release, timed_out, timeout_ns);
  return cudaGetLastError();
}

cudaError_t launch_vector_copy(void* dst, const void* src, std::size_t vectors, cudaStream_t stream) {
  if (vectors == 0) return cudaSuccess;
  constexpr std::size_t threads = 256;
  const std::size_t wanted = (vectors + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(wanted < 1024 ? wanted : 1024);
  vector_copy<<<blocks, threads, 0, stream>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src),
                                              vectors);
  return cudaGetLastError();
}

}  // namespace gpuxfer::bench
