// Stream-ordered calls from Python: the stream= argument, and what such a call keeps alive until its
// stream gets past it. A stream-ordered form returns once its work is queued; the host arrays, caller
// tensors and registered tensors it reads or writes must outlive that work even when the caller drops
// them at once, so the call leaves them here, behind an event, instead of on the caller.
#pragma once

#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>

namespace gpuxfer::python {

namespace nb = nanobind;

/// The stream= argument of a stream-ordered form: nullopt for None (the caller asked for the blocking or
/// handle form), else the handle gpuxfer._streams.stream_handle reads from a torch.cuda.Stream, a
/// cupy.cuda.Stream, an int or a __cuda_stream__ object. Call with the GIL held.
/// @throws nb::python_error (gpuxfer.InvalidArgumentError) for anything else
[[nodiscard]] std::optional<cudaStream_t> stream_arg(nb::handle stream);

/// Where a stream's queued work ends, as events: one on @p stream, or for 0 and cudaStreamLegacy (one
/// legacy default stream per device) one on the legacy default stream of each ordinal. A capturing
/// stream gets none (a captured event cannot be queried; see Kept). Move-only, owns its events.
class StreamMark {
 public:
  /// @throws gpuxfer::Error(Errc::cuda_error) when CUDA refuses an event
  StreamMark(cudaStream_t stream, std::span<const int> legacy_ordinals);
  ~StreamMark();
  StreamMark(StreamMark&& other) noexcept : events_(std::exchange(other.events_, {})) {}
  StreamMark& operator=(StreamMark&& other) noexcept;
  StreamMark(const StreamMark&) = delete;
  StreamMark& operator=(const StreamMark&) = delete;

  /// True once the stream has got past the mark. Never blocks. An event that reports an error (a faulted
  /// device) counts as not passed: what it guards leaks rather than being freed under the GPU.
  [[nodiscard]] bool passed() const noexcept;
  /// Blocks until the stream has got past the mark (or the device failed). Call without the GIL.
  void wait() const noexcept;

 private:
  void destroy() noexcept;
  std::vector<cudaEvent_t> events_;
};

/// Python objects a stream-ordered call uses, released once its stream gets past the call. Under graph
/// capture nothing can tell when a replay is done: the caller keeps the memory alive while the graph
/// may launch (the docstrings say so), and these are released at the next reap.
struct Kept {
  StreamMark mark;
  nb::object objects;
};

}  // namespace gpuxfer::python
