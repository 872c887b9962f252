#include "timing.hpp"

#include <algorithm>
#include <atomic>

#include <gpuxfer/error.hpp>

#include "gate_kernel.hpp"

namespace gpuxfer::bench {
namespace {

// Long enough for any honest queueing, short enough that a blocked host shows as an error, not a hang.
constexpr unsigned long long gate_timeout_ns = 10'000'000'000ULL;

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

// Median, min, max and count of @p times into @p stats (unchanged when there are none).
void summarize(std::vector<double> times, Stats& stats) {
  if (times.empty()) return;
  stats.samples = static_cast<int>(times.size());
  stats.min_s = *std::min_element(times.begin(), times.end());
  stats.max_s = *std::max_element(times.begin(), times.end());
  stats.median_s = median_of(std::move(times));
}

}  // namespace

std::optional<Stats> measure(const SampleFn& sample, int warmup, int iters, std::uint64_t& next_run,
                             const std::function<void(bool)>& phase) {
  Stats stats;
  std::vector<double> times;
  for (int i = 0; i < warmup + iters; ++i) {
    if (phase && (i == 0 || i == warmup)) phase(i >= warmup);
    const std::optional<Sample> s = sample(next_run++);
    if (!s) return std::nullopt;
    stats.wrong += s->wrong;
    if (i >= warmup) times.push_back(s->seconds);
  }
  summarize(std::move(times), stats);
  return stats;
}

std::optional<Stats> measure_interleaved(const SampleFn& baseline, const SampleFn& sample, int warmup,
                                         int rounds, int per_round, std::uint64_t& next_run,
                                         const std::function<void(bool)>& phase) {
  Stats stats;
  std::vector<double> all;
  std::vector<double> ours;
  std::vector<double> theirs;
  for (int i = 0; i < warmup + rounds * per_round; ++i) {
    if (phase && (i == 0 || i == warmup)) phase(i >= warmup);
    const std::optional<Sample> b = baseline(next_run++);
    const std::optional<Sample> s = b ? sample(next_run++) : std::nullopt;
    if (!s) return std::nullopt;
    stats.wrong += b->wrong + s->wrong;
    if (i < warmup) continue;
    theirs.push_back(b->seconds);
    ours.push_back(s->seconds);
    all.push_back(s->seconds);
    if (ours.size() == static_cast<std::size_t>(per_round)) {
      stats.rounds.push_back({median_of(std::move(ours)), median_of(std::move(theirs))});
      ours.clear();
      theirs.clear();
    }
  }
  summarize(std::move(all), stats);
  const auto disturbed = [](const Round& r) { return r.median_s * r.baseline_s; };
  const auto best =
      std::min_element(stats.rounds.begin(), stats.rounds.end(),
                       [&](const Round& a, const Round& b) { return disturbed(a) < disturbed(b); });
  if (best != stats.rounds.end()) {
    stats.median_s = best->median_s;
    stats.baseline_s = best->baseline_s;
  }
  return stats;
}

Gate::Gate() : flags_(2 * sizeof(int), cudaHostAllocPortable | cudaHostAllocMapped) {
  auto* f = reinterpret_cast<volatile int*>(flags_.data());
  f[0] = 0;
  f[1] = 0;
}

void Gate::hold(cudaStream_t stream) {
  auto* f = reinterpret_cast<volatile int*>(flags_.data());
  f[0] = 0;
  f[1] = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Mapped pinned memory has the same address on the device (unified addressing).
  cuda_check(launch_gate(f, f + 1, gate_timeout_ns, stream), "launching the spin kernel");
}

void Gate::release() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  reinterpret_cast<volatile int*>(flags_.data())[0] = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool Gate::timed_out() const noexcept { return reinterpret_cast<const volatile int*>(flags_.data())[1] != 0; }

GatedTimer::GatedTimer(const std::vector<Stream>& streams) : streams_(streams) {
  for (const Stream& s : streams) {
    start_.emplace_back(s.ordinal(), true);
    stop_.emplace_back(s.ordinal(), true);
    end_.emplace_back(s.ordinal(), false);
  }
}

double GatedTimer::time(const std::vector<std::size_t>& devices, const std::function<void()>& enqueue) {
  const double seconds = time_once(devices, enqueue, gated_);
  if (!gated_ || devices.size() != 1) return seconds;
  return std::min(seconds, time_once(devices, enqueue, false));
}

double GatedTimer::time_once(const std::vector<std::size_t>& devices, const std::function<void()>& enqueue,
                             bool gate) {
  const std::size_t first = devices.front();
  cudaStream_t lead = streams_[first].get();
  {
    DeviceGuard guard(streams_[first].ordinal());
    if (gate) gate_.hold(lead);
    cuda_check(cudaEventRecord(start_[first].get(), lead), "cudaEventRecord(start)");
  }
  for (const std::size_t d : devices) {
    if (d == first) continue;
    DeviceGuard guard(streams_[d].ordinal());
    cuda_check(cudaStreamWaitEvent(streams_[d].get(), start_[first].get(), 0), "cudaStreamWaitEvent(start)");
  }
  try {
    enqueue();
    for (const std::size_t d : devices) {
      if (d == first) continue;
      DeviceGuard guard(streams_[d].ordinal());
      cuda_check(cudaEventRecord(end_[d].get(), streams_[d].get()), "cudaEventRecord(end)");
    }
    DeviceGuard guard(streams_[first].ordinal());
    for (const std::size_t d : devices) {
      if (d != first) cuda_check(cudaStreamWaitEvent(lead, end_[d].get(), 0), "cudaStreamWaitEvent(end)");
    }
    cuda_check(cudaEventRecord(stop_[first].get(), lead), "cudaEventRecord(stop)");
  } catch (...) {
    gate_.release();  // never leave the spin kernel holding the device
    throw;
  }
  gate_.release();
  cuda_check(cudaEventSynchronize(stop_[first].get()), "waiting for the timed copies");
  if (gate && gate_.timed_out()) {
    throw Error(Errc::cuda_error, "the spin kernel timed out: queueing the timed work blocked the host");
  }
  float ms = 0;
  cuda_check(cudaEventElapsedTime(&ms, start_[first].get(), stop_[first].get()), "cudaEventElapsedTime");
  return static_cast<double>(ms) / 1e3;
}

}  // namespace gpuxfer::bench
