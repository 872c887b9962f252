// A point in time that every wait of a rendezvous is bounded by (GPUXFER_TIMEOUT), on the steady clock.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>

namespace gpuxfer::detail {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Deadline(std::chrono::milliseconds timeout) : timeout_(timeout), end_(Clock::now() + timeout) {}

  [[nodiscard]] bool expired() const { return Clock::now() >= end_; }

  /// Milliseconds left, at most @p cap, never negative: what poll() takes.
  [[nodiscard]] int poll_ms(std::chrono::milliseconds cap = std::chrono::milliseconds(1000)) const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now());
    return static_cast<int>(std::clamp(left, std::chrono::milliseconds(0), cap).count());
  }

  /// The whole timeout this deadline was made with.
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
  std::chrono::milliseconds timeout_;
  Clock::time_point end_;
};

}  // namespace gpuxfer::detail
