// The calling thread's stream-capture mode, relaxed for a scope (RelaxedCapture).
#pragma once

#include <cuda_runtime_api.h>

#include "runtime/driver_api.hpp"

namespace gpuxfer::detail {

/// While any stream of the process captures a CUDA graph in global mode (torch.cuda.graph's default),
/// CUDA refuses the calls it counts unsafe (allocating, registering and freeing memory, querying and
/// waiting for events and streams) from every thread, with cudaErrorStreamCaptureUnsupported, and
/// invalidates that capture. gpuxfer's calls of that kind concern its own memory, events and streams, or
/// the caller's host memory, never work of a capture: each is made with the calling thread relaxed for
/// its scope, so that an application capturing on one thread can keep moving data on another. A call
/// that does conflict with a capture (a query of an event recorded inside one) is refused as before.
/// The thread's own mode is restored when the scope ends; its current context is left as it was (the
/// driver's call switches the mode, see exchange_capture_mode).
class RelaxedCapture {
 public:
  RelaxedCapture() noexcept : switched_(exchange_capture_mode(mode_) == 0) {}
  ~RelaxedCapture() {
    if (switched_) (void)exchange_capture_mode(mode_);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  int mode_ = cudaStreamCaptureModeRelaxed;  // the thread's own while in scope
  bool switched_ = false;                    // restored only when it was switched
};

}  // namespace gpuxfer::detail
