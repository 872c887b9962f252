// A point in time that every wait of a rendezvous is bounded by (GPUXFER_TIMEOUT), on the steady clock.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>

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

}  // namespace gpuxfer::detail
