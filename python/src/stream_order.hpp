// Stream-ordered calls from Python: the stream= argument, and what such a call keeps alive until its
// stream gets past it. A stream-ordered form returns once its work is queued; the host arrays, caller
// tensors and registered tensors it reads or writes must outlive that work even when the caller drops
// them at once, so the call leaves them here, behind an event, instead of on the caller.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>

#include <gpuxfer/transfer_handle.hpp>

namespace gpuxfer::python {

namespace nb = nanobind;

/// The stream= argument of a stream-ordered form: nullopt for None (the caller asked for the blocking or
/// handle form), else the handle gpuxfer._streams.stream_handle reads from a torch.cuda.Stream, a
/// cupy.cuda.Stream, an int or a __cuda_stream__ object. Call with the GIL held.
/// @throws nb::python_error (gpuxfer.InvalidArgumentError) for anything else
[[nodiscard]] std::optional<cudaStream_t> stream_arg(nb::handle stream);

/// Returns what @p call returns (void too), after running @p after once @p call has returned (not when it
/// throws): a stream-ordered call, then the keeping of what it uses. Transfer needs the keep only after a
/// call that returned; Communicator keeps also after a throw (its Keeper in communicator.cpp).
template <typename Call, typename After>
auto call_then(Call&& call, After&& after) {
  if constexpr (std::is_void_v<decltype(call())>) {
    call();
    after();
  } else {
    auto result = call();
    after();
    return result;
  }
}

/// True while @p stream (not the legacy default stream, which cannot capture) is capturing into a CUDA
/// graph; false too when CUDA cannot tell (the call that uses the stream then says why). No event may be
/// queried meanwhile: that would invalidate the capture.
[[nodiscard]] bool capturing(cudaStream_t stream) noexcept;

/// Why a form without stream= refuses a capturing stream, after the operation's name: one wording for
/// the Transfer's host wait here and the Communicator's in Python (the module's _BLOCKING_UNDER_CAPTURE).
inline constexpr const char* blocking_under_capture =
    "without stream= is blocking and cannot be captured into a CUDA graph: pass the capturing stream as "
    "stream=";

/// Waits, the GIL released, for the work queued so far on @p stream (cudaStreamPerThread: the per-thread
/// stream of device @p ordinal; -1: of the current device): the host wait of a blocking form for the
/// caller's current stream. @p what names the operation in errors.
/// @throws gpuxfer::Error(Errc::unsupported) while @p stream captures (a host wait would invalidate the
///         capture), Error(Errc::cuda_error) when CUDA fails
void wait_for_stream(cudaStream_t stream, int ordinal, const std::string& what);

/// Makes @p consumer (a stream-ordered call's stream=) wait on the GPU for the work queued so far on
/// @p producer (the stream an array's __cuda_array_interface__ names), through an event: no host wait.
/// Nothing to do when they are the same stream (0 and cudaStreamLegacy count as one), nor while
/// @p consumer captures: a captured call is ordered with the capturing stream alone, as the C++ rules
/// say. The legacy and per-thread handles stand for a stream of device @p ordinal (-1: @p consumer's
/// device, else the current one). @p what names the operation in errors.
/// @throws gpuxfer::Error(Errc::unsupported) when @p producer captures and @p consumer does not,
///         Error(Errc::cuda_error) when CUDA refuses the event or the wait
void stream_wait_stream(cudaStream_t consumer, cudaStream_t producer, int ordinal, const std::string& what);

/// Where a stream's queued work ends, as events: one on @p stream, or for 0 and cudaStreamLegacy (one
/// legacy default stream per device) one on the legacy default stream of each ordinal, and for
/// cudaStreamPerThread one on this thread's per-thread stream of each ordinal (the current device's alone
/// may not be the one the call used). A capturing stream gets none (a captured event cannot be queried;
/// see Kept). Move-only, owns its events.
class StreamMark {
 public:
  /// @throws gpuxfer::Error(Errc::cuda_error) when CUDA refuses an event
  StreamMark(cudaStream_t stream, std::span<const int> legacy_ordinals);
  ~StreamMark();
  StreamMark(StreamMark&& other) noexcept : events_(std::exchange(other.events_, {})) {}
  StreamMark& operator=(StreamMark&& other) noexcept;
  StreamMark(const StreamMark&) = delete;
  StreamMark& operator=(const StreamMark&) = delete;

  /// True once the stream has got past the mark. Never blocks. Safe while another stream captures in
  /// global mode (this thread's capture mode is relaxed while it asks). An event that reports an error (a faulted
  /// device) counts as not passed: what it guards leaks rather than being freed under the GPU.
  [[nodiscard]] bool passed() const noexcept;
  /// Blocks until the stream has got past the mark (or the device failed). Call without the GIL.
  void wait() const noexcept;

 private:
  void destroy() noexcept;
  std::vector<cudaEvent_t> events_;
};

/// True once the operation of @p handle is done. Never blocks; safe while another stream captures in
/// global mode, as StreamMark::passed is. A failed operation counts as not done, as a faulted event does
/// there: what it may still touch leaks rather than being freed under the GPU.
[[nodiscard]] bool operation_done(const TransferHandle& handle) noexcept;

/// Python objects a stream-ordered call uses, released once its stream gets past the call. Under graph
/// capture nothing can tell when a replay is done: the caller keeps the memory alive while the graph
/// may launch (the docstrings say so), and these are released at the next reap.
struct Kept {
  StreamMark mark;
  nb::object objects;
};

/// What the stream-ordered calls of one object (a Transfer, a Communicator) keep alive, each call's
/// objects until its stream gets past it. Touch it with the GIL held.
class KeptObjects {
 public:
  KeptObjects() = default;
  /// Waits (GIL released) for the streams of what is still kept, so that nothing is freed under the GPU.
  ~KeptObjects();
  KeptObjects(const KeptObjects&) = delete;
  KeptObjects& operator=(const KeptObjects&) = delete;

  /// Keeps @p objects until @p stream gets past its work queued so far (legacy default stream: that of
  /// each of @p legacy_ordinals). When they cannot be kept, that work is waited for first (the GIL
  /// released; as StreamMark would mark it), so that a caller who drops them on the error frees nothing
  /// still queued.
  /// @throws Error(Errc::cuda_error) when CUDA refuses the mark's events, std::bad_alloc
  void keep(cudaStream_t stream, std::span<const int> legacy_ordinals, nb::object objects);
  /// Keeps @p objects until the operation of @p handle (whose Python handle was dropped before it was
  /// done) is: a stream of its own, on device @p ordinal, waits for the operation, and is marked. The
  /// handle itself may go: its pinned memory returns to the pool once the GPU is done with it.
  /// @throws Error(Errc::cuda_error) when CUDA refuses the stream, the wait or the mark
  void keep_after(const TransferHandle& handle, int ordinal, nb::object objects);
  /// Drops what the streams have got past. Never blocks. A finalizer run by the drop may call back into
  /// this object (reap, keep): the objects are dropped only once they are out of the list.
  void reap() noexcept;
  /// Waits (GIL released) for the streams of what is still kept, then drops it all (GIL held).
  void release();
  /// How many calls' objects are still kept.
  [[nodiscard]] std::size_t size() const noexcept { return kept_.size(); }

 private:
  static void wait_for(std::span<const Kept> kept);  // for every mark, the GIL released

  cudaStream_t after_ = nullptr;  // keep_after's stream, made at its first call, destroyed last
  std::vector<Kept> kept_;
};

}  // namespace gpuxfer::python
