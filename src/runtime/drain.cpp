#include "runtime/drain.hpp"

#include <gpuxfer/detail/device_guard.hpp>

#include "runtime/capture_mode.hpp"
#include "runtime/cuda_check.hpp"

namespace gpuxfer::detail {

DrainOnError::~DrainOnError() {
  if (std::uncaught_exceptions() <= exceptions_) return;
  const HostContextGuard context;  // streams of any device; a thread without a context is left without one
  for (cudaStream_t stream : streams_) {
    // A capturing stream runs nothing (its work is nodes of a graph) and must not be synchronised.
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) continue;
    const RelaxedCapture relaxed;
    (void)handled(cudaStreamSynchronize(stream));  // the exception in flight is what the caller hears
  }
}

}  // namespace gpuxfer::detail
