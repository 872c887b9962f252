// How the bench times things. gpuxfer's operations are blocking host calls: steady_clock around the call,
// after warm-up. Raw baselines are timed with CUDA events on the GPU: every stream is held behind a spin
// kernel until all copies are queued, then released together (nvbandwidth's method). Either way the
// result is the median of several samples, each verified before it counts.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "resources.hpp"

namespace gpuxfer::bench {

/// One timed run of an operation: its duration and the bytes that were wrong when checked after it.
struct Sample {
  double seconds = 0;
  std::size_t wrong = 0;
};

/// One round of an interleaved measurement: the medians of the operation's samples and of its baseline's.
struct Round {
  double median_s = 0;
  double baseline_s = 0;
};

/// The samples of one operation at one size. Warm-up samples count in #wrong but not in the times.
struct Stats {
  double median_s = 0;
  double min_s = 0;
  double max_s = 0;
  std::size_t wrong = 0;
  int samples = 0;
  /// Set by measure_interleaved: the baseline's median in the round that median_s comes from (the
  /// operation's ceiling, unless the operation outran a raw one: Report::add), and every round's two
  /// medians.
  std::optional<double> baseline_s{};
  std::vector<Round> rounds{};
};

/// One sample for run number @p run (the seed of its data patterns); nullopt when the operation cannot
/// run (it is then reported as waived).
using SampleFn = std::function<std::optional<Sample>(std::uint64_t run)>;

/// Runs @p warmup samples, then @p iters timed ones, numbering runs from @p next_run on (so that every
/// sample of the whole bench writes different data); the median of the timed ones. @p phase, when set,
/// is called with false before the warm-up and with true before the timed samples. nullopt when the
/// first sample says the operation cannot run.
[[nodiscard]] std::optional<Stats> measure(const SampleFn& sample, int warmup, int iters,
                                           std::uint64_t& next_run,
                                           const std::function<void(bool timed)>& phase = {});

/// @p sample interleaved with @p baseline, its raw baseline: after @p warmup untimed pairs, @p rounds rounds
/// of @p per_round pairs (a baseline sample, then one of the operation). Each round gives the two
/// medians; the result is the least disturbed round, the one whose two medians have the smallest
/// product: noise only ever adds time, to either side, and the product weighs the two sides' relative
/// slowdowns alike (the lowest ratio would favour a round whose baseline alone was slowed); the medians
/// inside a round keep one stray sample from choosing it. min_s and max_s span every round; #wrong
/// counts the baseline's samples too. nullopt when either says it cannot run.
[[nodiscard]] std::optional<Stats> measure_interleaved(const SampleFn& baseline, const SampleFn& sample,
                                                       int warmup, int rounds, int per_round,
                                                       std::uint64_t& next_run,
                                                       const std::function<void(bool timed)>& phase = {});

/// Seconds that @p fn takes, by steady_clock.
template <class Fn>
[[nodiscard]] double host_seconds(Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// A flag in mapped pinned memory that a spin kernel waits on.
class Gate {
 public:
  Gate();
  /// Queues the spin kernel on @p stream (on its device, which must be current) after re-arming the flag.
  void hold(cudaStream_t stream);
  /// Lets the spin kernel finish.
  void release() noexcept;
  /// True when the last hold gave up waiting (the host blocked while queueing behind it).
  [[nodiscard]] bool timed_out() const noexcept;

 private:
  PinnedMemory flags_;  // [0] release, [1] timed out
};

/// Times work queued on several devices' streams as one measurement, on the first device's clock.
class GatedTimer {
 public:
  /// @p streams: one stream per device index; they must outlive the timer.
  explicit GatedTimer(const std::vector<Stream>& streams);

  /// Holds the stream of @p devices.front() behind the gate and records a start event after it; the
  /// other devices' streams wait for that event. Then @p enqueue queues the work on the streams of
  /// @p devices; each device's end is joined back into the first stream, the gate is released and the
  /// time from start to the last end is returned. With one device the work runs a second time ungated,
  /// between two events, and the shorter time is returned: a small host -> device copy queued behind the
  /// spin kernel can read many times its time alone (4 KiB: about 59 us against 7 us on an H100), and a
  /// ceiling is the fastest the raw copy went. @throws Error when a CUDA call fails or the gate timed out
  /// (the measurement would be wrong).
  [[nodiscard]] double time(const std::vector<std::size_t>& devices, const std::function<void()>& enqueue);

  /// Whether time() holds the streams behind the spin kernel (the default). Warm-up samples run without
  /// it: the first run of a case may load kernels lazily or set up NCCL connections, which can wait for
  /// the device to go idle, and the spin kernel would keep it busy until it timed out.
  void set_gated(bool gated) noexcept { gated_ = gated; }

 private:
  double time_once(const std::vector<std::size_t>& devices, const std::function<void()>& enqueue, bool gate);

  const std::vector<Stream>& streams_;
  std::vector<Event> start_;  // per device, timing
  std::vector<Event> stop_;   // per device, timing
  std::vector<Event> end_;    // per device, no timing: joined into the first device's stream
  Gate gate_;
  bool gated_ = true;
};

}  // namespace gpuxfer::bench
