#include "runtime/event.hpp"

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <gpuxfer/detail/device_guard.hpp>

#include "runtime/capture_mode.hpp"
#include "runtime/cuda_check.hpp"

namespace gpuxfer::detail {

Event::Event(int device) : device_(device) {
  DeviceGuard guard(device);
  GPUXFER_CUDA_TRY_CTX(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming),
                       "creating an event on ordinal " + std::to_string(device));
}

Event::~Event() {
  if (event_ == nullptr) return;
  const DeviceGuard guard(device_, std::nothrow);
  (void)handled(cudaEventDestroy(event_));
}

void Event::record(cudaStream_t stream) {
  completed_.store(false, std::memory_order_release);
  GPUXFER_CUDA_TRY_CTX(cudaEventRecord(event_, stream), "recording an event on ordinal " + std::to_string(device_));
}

cudaError_t Event::seen(cudaError_t status) const noexcept {
  if (status == cudaSuccess) completed_.store(true, std::memory_order_release);
  return status;
}

cudaError_t Event::query() const noexcept {
  const DeviceGuard guard(device_, std::nothrow);
  const RelaxedCapture relaxed;
  return seen(handled(cudaEventQuery(event_)));
}

cudaError_t Event::synchronize() const noexcept {
  const DeviceGuard guard(device_, std::nothrow);
  const RelaxedCapture relaxed;
  return seen(handled(cudaEventSynchronize(event_)));
}

namespace {

struct EventCache {
  std::mutex mutex;
  std::unordered_map<int, std::vector<Event*>> idle;  // by device ordinal
};

// Never destroyed: events handed out may be let go during static destruction, after which a cache
// that no longer exists would be touched. The driver frees the events with the process.
EventCache& event_cache() {
  static auto* cache = new EventCache;
  return *cache;
}

}  // namespace

SharedEvent make_event(int device) {
  EventCache& cache = event_cache();
  Event* event = nullptr;
  {
    std::lock_guard lock(cache.mutex);
    auto& idle = cache.idle[device];
    if (!idle.empty()) {
      event = idle.back();
      idle.pop_back();
    }
  }
  if (event == nullptr) event = new Event(device);
  // A recorded event may be recorded again by its next owner: waits already queued on it keep the
  // state they captured, and nobody else queries it.
  return SharedEvent(event, [](Event* e) {
    EventCache& c = event_cache();
    try {
      std::lock_guard lock(c.mutex);
      c.idle[e->device()].push_back(e);
    } catch (...) {
      delete e;
    }
  });
}

SharedEvent record_event(int device, cudaStream_t stream) {
  SharedEvent event = make_event(device);
  event->record(stream);
  return event;
}

SharedEvent record_event_or_wait(int device, cudaStream_t stream) noexcept {
  try {
    return record_event(device, stream);
  } catch (...) {
    const RelaxedCapture relaxed;
    (void)handled(cudaStreamSynchronize(stream));
    return nullptr;
  }
}

void stream_wait(cudaStream_t stream, const SharedEvent& event) {
  // An event seen complete orders nothing: skipping the wait saves an API call per small operation.
  if (event && !event->completed()) GPUXFER_CUDA_TRY(cudaStreamWaitEvent(stream, event->get(), 0));
}

void stream_wait(cudaStream_t stream, const std::vector<SharedEvent>& events) {
  for (const SharedEvent& e : events) stream_wait(stream, e);
}

}  // namespace gpuxfer::detail
