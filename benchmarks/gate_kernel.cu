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

}  // namespace

cudaError_t launch_gate(const volatile int* release, volatile int* timed_out, unsigned long long timeout_ns,
                        cudaStream_t stream) {
  gate_kernel<<<1, 1, 0, stream>>>(release, timed_out, timeout_ns);
  return cudaGetLastError();
}

}  // namespace gpuxfer::bench
