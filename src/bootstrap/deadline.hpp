// A point in time that every wait of a rendezvous is bounded by (GPUXFER_TIMEOUT), on the steady clock, and
// call_within: a call that cannot be bounded itself (getaddrinfo), waited for until such a point.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>

namespace gpuxfer::detail {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  /// Ends @p timeout from now, or never when that is past the clock's range (a timeout meant as none).
  explicit Deadline(std::chrono::milliseconds timeout) : timeout_(timeout), end_(from_now(timeout)) {}
  /// Ends @p extra after @p timeout from now, as saturating: a waiter's margin over the peer it waits for.
  /// timeout() and describe() still say @p timeout, the one the user set.
  Deadline(std::chrono::milliseconds timeout, std::chrono::milliseconds extra)
      : timeout_(timeout),
        end_(from_now(extra > std::chrono::milliseconds::max() - timeout ? std::chrono::milliseconds::max()
                                                                         : timeout + extra)) {}

  [[nodiscard]] bool expired() const { return Clock::now() >= end_; }

  /// Milliseconds left, at most @p cap, never negative: what poll() takes.
  [[nodiscard]] int poll_ms(std::chrono::milliseconds cap = std::chrono::milliseconds(1000)) const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now());
    return static_cast<int>(std::clamp(left, std::chrono::milliseconds(0), cap).count());
  }

  /// The timeout this deadline was made with (without the extra).
  [[nodiscard]] std::chrono::milliseconds timeout() const { return timeout_; }

  /// The timeout as a user reads it: "2 s (GPUXFER_TIMEOUT)", "0.5 s (GPUXFER_TIMEOUT)".
  [[nodiscard]] std::string describe() const {
    const auto ms = timeout_.count();
    std::string seconds = std::to_string(ms / 1000);
    if (ms % 1000 != 0) {
      std::string fraction = std::to_string(1000 + ms % 1000).substr(1);
      while (fraction.back() == '0') fraction.pop_back();
      seconds += "." + fraction;
    }
    return seconds + " s (GPUXFER_TIMEOUT)";
  }

 private:
  static Clock::time_point from_now(std::chrono::milliseconds timeout) {
    const Clock::time_point now = Clock::now();
    const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now);
    return timeout >= room ? Clock::time_point::max() : now + timeout;
  }

  std::chrono::milliseconds timeout_;
  Clock::time_point end_;
};

/// Keeps the object that holds this code (libgpuxfer.so) loaded for the rest of the process: dlclose no
/// longer unloads it. Called when call_within leaves a call running, whose thread is still in the object's
/// code. Once per process; never throws; where the object cannot be named it does nothing.
void keep_loaded() noexcept;

/// Runs @p work on a thread of its own and waits for it until @p deadline: its value, or nothing when the
/// deadline comes first. A call that outlives the wait (a resolver that does not answer) runs to its end on
/// that thread, which holds what it writes, and its value is dropped; the library then stays loaded for
/// the rest of the process (keep_loaded), so that a dlclose cannot unmap the code that thread runs. What
/// @p work throws is rethrown here. Where no thread can be started, @p work runs on the caller's, unbounded.
template <class Work>
[[nodiscard]] std::optional<std::invoke_result_t<Work&>> call_within(const Deadline& deadline, Work work) {
  using Value = std::invoke_result_t<Work&>;
  struct State {
    explicit State(Work&& w) : work(std::move(w)) {}
    Work work;
    std::mutex mutex;
    std::condition_variable finished;
    std::optional<Value> value;
    std::exception_ptr error;
    bool done = false;
  };
  auto state = std::make_shared<State>(std::move(work));
  try {
    std::thread([state] {
      std::optional<Value> value;
      std::exception_ptr error;
      try {
        value.emplace(state->work());
      } catch (...) {
        error = std::current_exception();
      }
      const std::lock_guard lock(state->mutex);
      state->value = std::move(value);
      state->error = error;
      state->done = true;
      state->finished.notify_one();
    }).detach();
  } catch (const std::system_error&) {
    return state->work();  // no thread to be had
  }
  std::unique_lock lock(state->mutex);
  while (!state->done && !deadline.expired()) {
    state->finished.wait_for(lock, std::chrono::milliseconds(deadline.poll_ms()));
  }
  if (!state->done) {
    keep_loaded();
    return std::nullopt;
  }
  if (state->error) std::rethrow_exception(state->error);
  return std::move(state->value);
}

}  // namespace gpuxfer::detail
