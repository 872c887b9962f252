// CUDA events: a move-only owner, a process-wide cache of them, and the record/wait pair that orders
// work across streams and devices on the GPU.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

namespace gpuxfer::detail {

/// An event without timing, owned on one device. The destructor never throws.
class Event {
 public:
  /// Creates the event on @p device. @throws Error on failure
  explicit Event(int device);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  [[nodiscard]] cudaEvent_t get() const noexcept { return event_; }
  [[nodiscard]] int device() const noexcept { return device_; }
  /// Records the event on @p stream (a stream of the same device). @throws Error on failure
  void record(cudaStream_t stream);
  /// cudaEventQuery and cudaEventSynchronize with the event's device current (DeviceGuard), so that a
  /// host thread that waits makes no context current and creates none. A failure is returned, its mark
  /// on the thread's last error cleared (handled()): callers decide what it means.
  [[nodiscard]] cudaError_t query() const noexcept;
  [[nodiscard]] cudaError_t synchronize() const noexcept;
  /// True once query() or synchronize() has seen the last record complete: waiting for the event, or
  /// asking about it again, is then needless (stream_wait skips it). False says nothing.
  [[nodiscard]] bool completed() const noexcept { return completed_.load(std::memory_order_acquire); }

 private:
  [[nodiscard]] cudaError_t seen(cudaError_t status) const noexcept;

  int device_ = -1;
  cudaEvent_t event_ = nullptr;
  mutable std::atomic<bool> completed_{false};
};

using SharedEvent = std::shared_ptr<Event>;

/// An event of @p device from a process-wide cache (creating events costs microseconds, which small
/// transfers feel); it returns to the cache when the last owner lets go.
[[nodiscard]] SharedEvent make_event(int device);

/// An event from the cache on @p device, recorded on @p stream.
[[nodiscard]] SharedEvent record_event(int device, cudaStream_t stream);
/// record_event for a failure path: when no event can be recorded, waits on the host for @p stream instead
/// and gives null (the work queued on it is then over). Never throws.
[[nodiscard]] SharedEvent record_event_or_wait(int device, cudaStream_t stream) noexcept;

/// Makes @p stream wait for @p event on the GPU (no host blocking); a null event is a no-op.
void stream_wait(cudaStream_t stream, const SharedEvent& event);
/// Makes @p stream wait for every one of @p events.
void stream_wait(cudaStream_t stream, const std::vector<SharedEvent>& events);

}  // namespace gpuxfer::detail
