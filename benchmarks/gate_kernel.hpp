// The spin kernel that holds streams until every copy of a measurement is queued (nvbandwidth's way), so
// that the timed copies start together instead of one by one as the host queues them. C++17 and no
// gpuxfer header: gate_kernel.cu includes it, and nvcc compiles .cu files as C++17 here.
#pragma once

#include <cuda_runtime_api.h>

namespace gpuxfer::bench {

/// Queues on @p stream a one-thread kernel that spins until the host writes a non-zero value to
/// @p *release (mapped pinned memory), or until @p timeout_ns have passed, in which case it writes 1 to
/// @p *timed_out. Returns the launch error, cudaSuccess when queued.
cudaError_t launch_gate(const volatile int* release, volatile int* timed_out, unsigned long long timeout_ns,
                        cudaStream_t stream);

}  // namespace gpuxfer::bench
