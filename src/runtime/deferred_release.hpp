// Letting go of memory without waiting for the GPU: cudaHostUnregister (and cudaFreeHost, cudaFree) wait
// for the work queued on every stream of the device, so a stream-ordered call that lets go of page-locked
// memory would wait there for the caller's GPU work. A DeferredRelease drops what it is given on a thread
// of its own instead.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace gpuxfer::detail {

/// Drops the objects handed to release() on a thread of its own, in order: their destructors (which
/// may wait for the GPU) run there, not in the caller's call. The thread starts with the first release;
/// drain() and the destructor wait until every object handed over is gone. Thread-safe.
class DeferredRelease {
 public:
  DeferredRelease() = default;
  /// Drains, then stops the thread.
  ~DeferredRelease();
  DeferredRelease(const DeferredRelease&) = delete;
  DeferredRelease& operator=(const DeferredRelease&) = delete;

  /// Hands @p object over to be dropped on the thread. Where the thread cannot start (or no memory is left
  /// for the queue) it is dropped here. Never throws.
  void release(std::shared_ptr<void> object) noexcept;
  /// Returns once every object handed over before the call is gone. Never throws.
  void drain() noexcept;
  /// As drain(), waiting at most @p limit: false when objects handed over are still there then (a
  /// destructor that waits for the GPU may wait for work that never ends). Never throws.
  [[nodiscard]] bool drain_for(std::chrono::milliseconds limit) noexcept;

 private:
  void run(const std::stop_token& stop);

  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::condition_variable_any idle_;
  std::deque<std::shared_ptr<void>> queue_;
  bool busy_ = false;  ///< the thread is dropping an object it took off the queue
  std::jthread thread_;
};

}  // namespace gpuxfer::detail
