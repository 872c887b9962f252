// stream_arg, and the events of StreamMark.
#include "stream_order.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <new>
#include <string>
#include <utility>

#include <cuda.h>
#include <cudaTypedefs.h>

#include <gpuxfer/detail/device_guard.hpp>
#include <gpuxfer/error.hpp>

namespace gpuxfer::python {
namespace {

void check(cudaError_t rc, const std::string& context) {
  if (rc != cudaSuccess)
    throw Error(Errc::cuda_error,
                context + ": " + cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ")");
}

void check(cudaError_t rc, const char* what) { check(rc, std::string("stream= keep-alive: ") + what); }

// Its device's primary context current for the scope, the thread's own (or none) restored after: a
// thread that had no context is left with none (restoring "device 0" would create that device's context).
using CurrentDevice = gpuxfer::detail::DeviceGuard;
// Any context current for a call about a caller's stream or an event, creating none (the thread's own
// when it has one, else one the process made already): the runtime would make the current device's
// primary context current on a thread that has none, for good.
using AnyContext = gpuxfer::detail::HostContextGuard;

// The driver's cuThreadExchangeStreamCaptureMode, nullptr when the driver lacks it. Not the runtime's
// cudaThreadExchangeStreamCaptureMode, which makes the current device's primary context current on a
// thread that had none (as the library's own RelaxedCapture, src/runtime/capture_mode.hpp).
PFN_cuThreadExchangeStreamCaptureMode_v10010 exchange_capture_mode() noexcept {
  static const auto exchange = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuThreadExchangeStreamCaptureMode", &fn, 10010, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      fn = nullptr;
    }
    return reinterpret_cast<PFN_cuThreadExchangeStreamCaptureMode_v10010>(fn);
  }();
  return exchange;
}

// While a stream of the process captures in global mode (torch.cuda.graph's default) an event query or
// wait from any thread would invalidate that capture: this thread is relaxed for the scope. None of the
// events it queries was recorded in a capture (StreamMark records none there).
class RelaxedCapture {
 public:
  RelaxedCapture() noexcept : exchange_(exchange_capture_mode()) {
    if (exchange_ != nullptr && exchange_(&mode_) != CUDA_SUCCESS) exchange_ = nullptr;
  }
  ~RelaxedCapture() {
    if (exchange_ != nullptr) (void)exchange_(&mode_);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  PFN_cuThreadExchangeStreamCaptureMode_v10010 exchange_;      // nullptr: not switched, nothing to restore
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;  // the thread's own while in scope
};

// The legacy default stream (0, cudaStreamLegacy) and the per-thread one: a stream of each device.
bool stands_for_devices(cudaStream_t s) noexcept {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

bool legacy(cudaStream_t s) noexcept { return s == nullptr || s == cudaStreamLegacy; }

// An event of its scope, made on the current device; destroying it while a wait on it is queued is safe.
class ScopedEvent {
 public:
  explicit ScopedEvent(const std::string& context) {
    check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), context + ": cudaEventCreateWithFlags");
  }
  ~ScopedEvent() { (void)cudaEventDestroy(event_); }
  ScopedEvent(const ScopedEvent&) = delete;
  ScopedEvent& operator=(const ScopedEvent&) = delete;
  [[nodiscard]] cudaEvent_t get() const noexcept { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Waits, the GIL released, for the work queued so far where StreamMark(@p stream, @p legacy_ordinals)
// would have marked it, when it could not: what that work uses cannot be kept behind a mark. Nothing to
// wait for on a capturing stream (its work runs when the graph does). A failed wait is not reported: the
// caller raises the mark's error.
void wait_unmarked(cudaStream_t stream, std::span<const int> legacy_ordinals) noexcept {
  const AnyContext context;
  nb::gil_scoped_release gil;
  const RelaxedCapture relaxed;  // not capturing: another thread's global-mode capture may refuse it
  auto wait = [](cudaStream_t s) {
    if (!capturing(s) && cudaStreamSynchronize(s) != cudaSuccess) (void)cudaGetLastError();
  };
  if (!stands_for_devices(stream)) {
    wait(stream);
    return;
  }
  for (int ordinal : legacy_ordinals) {
    const CurrentDevice on(ordinal, std::nothrow);
    if (on.entered()) wait(stream == cudaStreamPerThread ? cudaStreamPerThread : cudaStreamLegacy);
  }
}

}  // namespace

std::optional<cudaStream_t> stream_arg(nb::handle stream) {
  if (stream.is_none()) return std::nullopt;
  nb::object handle = nb::module_::import_("gpuxfer._streams").attr("stream_handle")(stream);
  return reinterpret_cast<cudaStream_t>(nb::cast<std::uintptr_t>(handle));
}

bool capturing(cudaStream_t stream) noexcept {
  if (stream == nullptr || stream == cudaStreamLegacy) return false;
  const AnyContext context;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone;
}

void wait_for_stream(cudaStream_t stream, int ordinal, const std::string& what) {
  const AnyContext context;
  std::optional<CurrentDevice> on;
  if (ordinal >= 0) on.emplace(ordinal);
  if (capturing(stream)) {
    throw Error(Errc::unsupported, what + " " + blocking_under_capture);
  }
  cudaError_t rc = cudaSuccess;
  {
    nb::gil_scoped_release gil;
    const RelaxedCapture relaxed;  // not capturing: another thread's global-mode capture may refuse it
    rc = cudaStreamSynchronize(stream);
  }
  check(rc, what + ": waiting for the current stream");
}

void stream_wait_stream(cudaStream_t consumer, cudaStream_t producer, int ordinal, const std::string& what) {
  if (consumer == producer || (legacy(consumer) && legacy(producer)) || capturing(consumer)) return;
  const AnyContext any;
  const std::string context = what + ": stream= waiting for the array's stream (__cuda_array_interface__)";
  if (capturing(producer)) {
    throw Error(Errc::unsupported,
                context + ": that stream is capturing into a CUDA graph and stream= is not");
  }
  int device = ordinal;
  if (!stands_for_devices(producer)) {
    check(cudaStreamGetDevice(producer, &device), context + ": cudaStreamGetDevice");
  } else if (device < 0 && !stands_for_devices(consumer)) {
    check(cudaStreamGetDevice(consumer, &device), context + ": cudaStreamGetDevice");
  }
  std::optional<CurrentDevice> on;
  if (device >= 0) on.emplace(device);
  const RelaxedCapture relaxed;  // not capturing: another thread's global-mode capture may refuse these
  const ScopedEvent event(context);
  check(cudaEventRecord(event.get(), producer), context + ": cudaEventRecord");
  check(cudaStreamWaitEvent(consumer, event.get(), 0), context + ": cudaStreamWaitEvent");
}

StreamMark::StreamMark(cudaStream_t stream, std::span<const int> legacy_ordinals) {
  // The legacy and the per-thread stream handles stand for a stream of each device: marked on each of
  // @p legacy_ordinals (the call ran on those devices' streams, whatever the current device is here).
  const AnyContext context;
  const bool legacy = stands_for_devices(stream);
  const cudaStream_t handle = stream == cudaStreamPerThread ? cudaStreamPerThread : cudaStreamLegacy;
  std::vector<int> ordinals;
  if (legacy) {
    ordinals.assign(legacy_ordinals.begin(), legacy_ordinals.end());
  } else {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    check(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing");
    if (status != cudaStreamCaptureStatusNone) return;
    int ordinal = 0;
    check(cudaStreamGetDevice(stream, &ordinal), "cudaStreamGetDevice");
    ordinals.push_back(ordinal);
  }
  try {
    for (int ordinal : ordinals) {
      CurrentDevice on(ordinal);
      if (stream == cudaStreamPerThread && capturing(cudaStreamPerThread)) continue;  // see the class
      cudaEvent_t event = nullptr;
      check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
      events_.push_back(event);
      check(cudaEventRecord(event, legacy ? handle : stream), "cudaEventRecord");
    }
  } catch (...) {
    destroy();
    throw;
  }
}

StreamMark::~StreamMark() { destroy(); }

StreamMark& StreamMark::operator=(StreamMark&& other) noexcept {
  if (this != &other) {
    destroy();
    events_ = std::exchange(other.events_, {});
  }
  return *this;
}

bool StreamMark::passed() const noexcept {
  if (events_.empty()) return true;
  const AnyContext context;
  const RelaxedCapture relaxed;
  for (cudaEvent_t e : events_) {
    if (cudaEventQuery(e) != cudaSuccess) return false;
  }
  return true;
}

void StreamMark::wait() const noexcept {
  if (events_.empty()) return;
  const AnyContext context;
  const RelaxedCapture relaxed;
  for (cudaEvent_t e : events_) (void)cudaEventSynchronize(e);
}

KeptObjects::~KeptObjects() {
  wait_for(kept_);
  if (after_ == nullptr) return;
  const AnyContext context;
  (void)cudaStreamDestroy(after_);
}

void KeptObjects::keep(cudaStream_t stream, std::span<const int> legacy_ordinals, nb::object objects) {
  try {
    if (kept_.size() == kept_.capacity()) kept_.reserve(kept_.empty() ? 8 : 2 * kept_.capacity());
    StreamMark mark(stream, legacy_ordinals);
    kept_.push_back({std::move(mark), std::move(objects)});  // no throw: room was made
  } catch (...) {
    wait_unmarked(stream, legacy_ordinals);  // @p objects still held
    throw;
  }
}

void KeptObjects::keep_after(const TransferHandle& handle, int ordinal, nb::object objects) {
  const AnyContext context;
  const RelaxedCapture relaxed;  // another stream may capture in global mode meanwhile
  if (after_ == nullptr) {
    const CurrentDevice on(ordinal);
    check(cudaStreamCreateWithFlags(&after_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  handle.stream_wait(after_);
  kept_.push_back({StreamMark(after_, {}), std::move(objects)});
}

bool operation_done(const TransferHandle& handle) noexcept {
  const RelaxedCapture relaxed;
  try {
    return handle.ready();
  } catch (...) {
    return false;
  }
}

void KeptObjects::reap() noexcept {
  // Swaps move the entries, dropping none; the ones passed are moved out, the list cut back (moved-from
  // entries hold nothing), and only then are they dropped: a reap or keep of a finalizer sees a whole list.
  const auto first_passed =
      std::partition(kept_.begin(), kept_.end(), [](const Kept& k) { return !k.mark.passed(); });
  std::vector<Kept> passed;
  try {
    passed.reserve(static_cast<std::size_t>(kept_.end() - first_passed));
  } catch (...) {  // no room: kept until a later reap
    return;
  }
  passed.insert(passed.end(), std::make_move_iterator(first_passed), std::make_move_iterator(kept_.end()));
  kept_.erase(first_passed, kept_.end());
}  // dropped here, the GIL held

void KeptObjects::release() {
  // Taken out first: another thread may keep a call's objects while this one waits without the GIL.
  const std::vector<Kept> kept = std::exchange(kept_, {});
  wait_for(kept);
}  // dropped here, the GIL held

void KeptObjects::wait_for(std::span<const Kept> kept) {
  if (kept.empty()) return;
  nb::gil_scoped_release gil;
  for (const Kept& k : kept) k.mark.wait();
}

void StreamMark::destroy() noexcept {
  if (events_.empty()) return;
  const AnyContext context;
  for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);  // safe while pending
  events_.clear();
}

}  // namespace gpuxfer::python
