// What GpuStress (test_stress.cpp) knows and counts: its configuration, a model of what each buffer holds
// (runs of pattern bytes), the tally of operations, and the first phase's worker (stress_worker.cpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpu/fixture.hpp"

namespace gpuxfer::test::stress {

constexpr std::size_t kSlack = 4096;  // room for unaligned offsets

inline std::size_t env_count(const char* name, std::size_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  std::size_t value = 0;
  const std::string_view view(text);
  const auto [end, ec] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (ec != std::errc{} || end != view.data() + view.size()) {
    throw std::runtime_error(std::string(name) + "=" + text + " is not a non-negative integer");
  }
  return value;
}

struct Config {
  std::size_t threads = env_count("GPUXFER_STRESS_THREADS", 8);
  std::size_t ops = env_count("GPUXFER_STRESS_OPS", 500);
  std::uint64_t seed = env_count("GPUXFER_STRESS_SEED", 1);
  std::size_t timeout_s = env_count("GPUXFER_STRESS_TIMEOUT_S", 150);
  std::size_t max_bytes = std::min<std::size_t>(64 * kMiB, test_max_bytes().value_or(64 * kMiB));
};

// --- what a buffer holds: runs of pattern bytes ---------------------------------------------------------

struct Run {
  std::size_t begin;           // byte offset in the buffer
  std::size_t len;             // bytes
  std::uint64_t seed;          // pattern seed
  std::uint64_t pattern_base;  // pattern offset of the run's first byte
};

class Content {
 public:
  Content() = default;
  static Content pattern(std::size_t size, std::uint64_t seed) {
    Content c;
    c.size_ = size;
    if (size != 0) c.runs_.push_back({0, size, seed, 0});
    return c;
  }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }

  /// Bytes [begin, begin + len) as content of their own.
  [[nodiscard]] Content range(std::size_t begin, std::size_t len) const {
    Content out;
    out.size_ = len;
    for (const Run& r : runs_) {
      const std::size_t lo = std::max(r.begin, begin);
      const std::size_t hi = std::min(r.begin + r.len, begin + len);
      if (lo < hi) out.runs_.push_back({lo - begin, hi - lo, r.seed, r.pattern_base + (lo - r.begin)});
    }
    return out;
  }

  /// Bytes [0, src.size()) now hold src's bytes; the rest stays.
  void overwrite_prefix(const Content& src) {
    std::vector<Run> runs = src.runs_;
    for (const Run& r : range(src.size(), size_ - std::min(size_, src.size())).runs_) {
      runs.push_back({r.begin + src.size(), r.len, r.seed, r.pattern_base});
    }
    runs_ = std::move(runs);
    size_ = std::max(size_, src.size());
  }

  [[nodiscard]] std::size_t mismatches_host(std::span<const std::byte> data) const {
    if (data.size() != size_) return std::max(data.size(), size_);
    std::size_t bad = 0;
    for (const Run& r : runs_)
      bad += pattern::count_mismatches_host(data.subspan(r.begin, r.len), r.seed, r.pattern_base);
    return bad;
  }

  /// Counted on the GPU, on @p stream of the current device (the device of @p data).
  [[nodiscard]] std::size_t mismatches_device(const std::byte* data, cudaStream_t stream) const {
    std::size_t bad = 0;
    for (const Run& r : runs_) {
      bad += pattern::count_mismatches_device(data + r.begin, r.len, r.seed, r.pattern_base, stream);
    }
    return bad;
  }

 private:
  std::vector<Run> runs_;
  std::size_t size_ = 0;
};

// --- counts of what was done ---------------------------------------------------------------------------

struct Tally {
  std::map<std::string, std::pair<std::size_t, std::size_t>> by_kind;  // ops, bytes
  void add(const std::string& kind, std::size_t bytes) {
    by_kind[kind].first += 1;
    by_kind[kind].second += bytes;
  }
  void merge(const Tally& other) {
    for (const auto& [kind, v] : other.by_kind) {
      by_kind[kind].first += v.first;
      by_kind[kind].second += v.second;
    }
  }
};

/// One thread of the first phase: its own engine over @p manager and a buffer on every device, a model of
/// each, @p config.ops random operations, every result checked. A wrong result goes to @p record (the
/// thread then stops); @p progress and @p doing say how far it got, for the watchdog. Returns what it did.
Tally run_worker(std::shared_ptr<MultiGpuManager> manager, const Config& config, std::size_t index,
                 std::vector<int> ordinals, std::atomic<std::size_t>& progress, std::atomic<const char*>& doing,
                 std::function<void(const std::string&)> record);

/// One thread of the stream-ordered phase (stress_streams.cpp): its own engine, a buffer and a producer
/// stream on every device, a caller stream; config.ops / 10 rounds of a stream-ordered operation between
/// two generations written by the producers, each checked. Reports as run_worker does.
Tally run_stream_worker(std::shared_ptr<MultiGpuManager> manager, const Config& config, std::size_t index,
                        const std::vector<int>& ordinals, std::atomic<std::size_t>& progress,
                        std::atomic<const char*>& doing, std::function<void(const std::string&)> record);

}  // namespace gpuxfer::test::stress
