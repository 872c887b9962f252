// The bench's kernels: the spin kernel that holds streams until every copy of a measurement is queued
// (nvbandwidth's way), so that the timed copies start together instead of one by one as the host queues
// them, and a plain copy for raw graphs of kernel nodes. C++17 and no gpuxfer header: gate_kernel.cu
// includes it, and nvcc compiles .cu files as C++17 here.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace gpuxfer::bench {

/// Queues on @p stream a one-thread kernel that spins until the host writes a non-zero value to
/// @p *release (mapped pinned memory), or until @p timeout_ns have passed, in which case it writes 1 to
/// @p *timed_out. Returns the launch error, cudaSuccess when queued.
cudaError_t launch_gate(const volatile int* release, volatile int* timed_out, unsigned long long timeout_ns,
                        cudaStream_t stream);

/// Queues on @p stream a plain copy of @p vectors 16-byte vectors from @p src to @p dst (both 16-byte
/// aligned; pinned host memory, which the device maps at its own address, included): the kernel node of
/// the raw graph ceilings. Returns the launch error, cudaSuccess when queued (or nothing to copy).
cudaError_t launch_vector_copy(void* dst, const void* src, std::size_t vectors, cudaStream_t stream);

}  // namespace gpuxfer::bench
