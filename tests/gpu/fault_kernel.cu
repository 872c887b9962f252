#include "fault_kernel.hpp"

namespace gpuxfer::test {
namespace {

// volatile: the store must happen even though nothing reads it.
__global__ void illegal_write_kernel(volatile int* address) { *address = 0x5a5a5a5a; }

}  // namespace

cudaError_t launch_illegal_write(void* address, cudaStream_t stream) {
  illegal_write_kernel<<<1, 1, 0, stream>>>(static_cast<volatile int*>(address));
  return cudaGetLastError();
}

}  // namespace gpuxfer::test
