#include "runtime/deferred_release.hpp"

#include <utility>

namespace gpuxfer::detail {

DeferredRelease::~DeferredRelease() {
  drain();
  if (thread_.joinable()) {
    thread_.request_stop();
    wake_.notify_all();
    thread_.join();
  }
}

void DeferredRelease::release(std::shared_ptr<void> object) noexcept {
  if (!object) return;
  try {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) thread_ = std::jthread([this](const std::stop_token& stop) { run(stop); });
    queue_.push_back(std::move(object));
  } catch (...) {
    object.reset();  // here, then: no thread, or no room in the queue
    return;
  }
  wake_.notify_one();
}

void DeferredRelease::drain() noexcept {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

bool DeferredRelease::drain_for(std::chrono::milliseconds limit) noexcept {
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, limit, [&] { return queue_.empty() && !busy_; });
}

void DeferredRelease::run(const std::stop_token& stop) {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, stop, [&] { return !queue_.empty(); });
    if (queue_.empty()) return;  // stopped
    std::shared_ptr<void> object = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    object.reset();  // the destructor runs here, unlocked
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace gpuxfer::detail
