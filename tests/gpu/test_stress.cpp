// GpuStress: many threads call every operation at once on one shared manager, with random sizes from 0
// to 64 MiB (log-uniform, so mostly small), unaligned offsets and every path, and every result is checked
// byte for byte. Each thread owns an engine and a buffer on every device, and keeps a model of what each
// of its registered buffers holds (runs of pattern bytes), so that after a copy, a broadcast or a new
// registration it knows exactly what every byte on every device and in every output must be. A second
// phase shares one engine between all threads: some re-register among prepared buffers while the others
// gather, and every gathered entry must be one of those buffers whole.
//
// Passes when no byte is wrong, nothing throws, the pinned pool has nothing in use at the end, and the
// whole finishes before the watchdog's limit (150 s; a deadlock fails with each thread's last operation).
// GPUXFER_STRESS_THREADS (8), GPUXFER_STRESS_OPS (500 per thread), GPUXFER_STRESS_SEED (1) and
// GPUXFER_STRESS_TIMEOUT_S (150) override the defaults; GPUXFER_TEST_MAX_BYTES caps the sizes, and
// GPUXFER_NCCL=0 keeps broadcast_from_device off NCCL (as in the sanitizer run). The
// counts of operations per kind, the bytes moved and the time are printed and recorded as properties.
#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kSlack = 4096;  // room for unaligned offsets

std::size_t env_count(const char* name, std::size_t fallback) {
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

// --- the test ---------------------------------------------------------------------------------------------

class GpuStress : public GpuTest {
 public:
  /// Keeps a wrong result (the first 50) for the report; called by every thread.
  void record(const std::string& failure) {
    const std::lock_guard lock(mutex_);
    if (failures_.size() < 50) failures_.push_back(failure);
  }

 protected:
  [[nodiscard]] Options options() const override {
    Options opts = GpuTest::options();
    opts.chunk_bytes = kMiB;  // many chunks, most ending in a partial one
    // The sanitizer run keeps NCCL out (GPUXFER_NCCL=0): its path runs under every tool in gpuxfer check.
    if (const char* nccl = std::getenv("GPUXFER_NCCL"); nccl != nullptr && *nccl != '\0') {
      opts.enable_nccl = parse_bool(nccl);
    }
    return opts;
  }

  Config config_;
  std::mutex mutex_;
  std::vector<std::string> failures_;
  Tally tally_;
  std::vector<std::atomic<std::size_t>> progress_;  // per thread: operations done
  std::vector<std::atomic<const char*>> doing_;     // per thread: the operation running
};

// One thread of the first phase: its own engine, a buffer per device, a model of each.
class Worker {
 public:
  Worker(GpuStress& test, std::shared_ptr<MultiGpuManager> manager, const Config& config, std::size_t index,
         std::vector<int> ordinals)
      : config_(config),
        index_(index),
        rng_(config.seed * 1000003 + index),
        manager_(std::move(manager)),
        engine_(manager_),
        ordinals_(std::move(ordinals)),
        count_(ordinals_.size()),
        host_(new std::byte[count_ * config.max_bytes + 2 * kSlack]),
        pinned_(count_ * config.max_bytes + 2 * kSlack),
        test_(test) {
    for (std::size_t d = 0; d < count_; ++d) {
      memory_.push_back(std::make_unique<DeviceMemory>(ordinals_[d], config.max_bytes + kSlack));
      streams_.push_back(std::make_unique<Stream>(ordinals_[d]));
    }
    offset_.assign(count_, 0);
    content_.assign(count_, Content{});
    outputs_.resize(count_);
  }

  // Registers every device, then runs the random operations. Returns false after the first failure.
  bool run(std::atomic<std::size_t>& progress, std::atomic<const char*>& doing) {
    for (std::size_t d = 0; d < count_; ++d) {
      reregister(d);
      tally_.add("set_device_buffer", 0);
    }
    for (std::size_t op = 0; op < config_.ops; ++op) {
      const Kind kind = pick();
      doing = kNames[static_cast<int>(kind)];
      what_.clear();
      try {
        if (!perform(kind)) return false;
      } catch (const std::exception& e) {
        fail(std::string("threw: ") + e.what());
        return false;
      }
      ++progress;
    }
    doing = "done";
    return true;
  }

  const Tally& tally() const { return tally_; }

 private:
  enum class Kind {
    set_device_buffer,
    gather_blocking,
    gather_all,
    gather_into,
    gather_to_device,
    copy_buffer,
    copy_device_buffer,
    broadcast,
    broadcast_from_device,
    gather_slices,
  };
  static constexpr const char* kNames[] = {
      "set_device_buffer", "gather_blocking",    "gather_all", "gather_into",           "gather_to_device",
      "copy_buffer",       "copy_device_buffer", "broadcast",  "broadcast_from_device", "gather_slices"};

  Kind pick() {
    const bool two = count_ > 1;
    std::discrete_distribution<int> d({3, 2, 2, 3, 2, 2, two ? 3.0 : 0.0, 3, two ? 2.0 : 0.0, 2});
    return static_cast<Kind>(d(rng_));
  }

  std::size_t uniform(std::size_t lo, std::size_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng_);
  }
  bool coin() { return (rng_() & 1) != 0; }

  // Log-uniform in [1, max], and 0 one time in 32.
  std::size_t random_size(std::size_t max) {
    if (max == 0 || rng_() % 32 == 0) return 0;
    const double e =
        std::uniform_real_distribution<double>(0.0, std::log2(static_cast<double>(max) + 1.0))(rng_);
    return std::clamp<std::size_t>(static_cast<std::size_t>(std::exp2(e)), 1, max);
  }

  std::uint64_t fresh_seed() {
    return pattern::seed_for(config_.seed * 1000000007ULL + index_ * 10000000ULL + ++seeds_, 77);
  }

  std::byte* registered(std::size_t d) const { return memory_[d]->get() + offset_[d]; }
  cudaStream_t stream(std::size_t d) const { return streams_[d]->get(); }

  void fail(const std::string& why) {
    test_.record("thread " + std::to_string(index_) + " op " + std::to_string(ops_) + " " + what_ + ": " +
                 why);
  }

  // Checks that device @p d's registered buffer holds what the model says.
  bool check_device(std::size_t d, const std::string& what) {
    const DeviceGuard guard(ordinals_[d]);
    const std::size_t bad = content_[d].mismatches_device(registered(d), stream(d));
    if (bad == 0) return true;
    fail(what + ": " + std::to_string(bad) + " of " + std::to_string(content_[d].size()) +
         " bytes wrong on device " + std::to_string(d));
    return false;
  }

  bool check_host(std::span<const std::byte> got, const Content& want, const std::string& what) {
    const std::size_t bad = want.mismatches_host(got);
    if (bad == 0) return true;
    fail(what + ": " + std::to_string(bad) + " bytes wrong (got " + std::to_string(got.size()) +
         " bytes, want " + std::to_string(want.size()) + ")");
    return false;
  }

  bool check_poison(std::span<const std::byte> bytes, const std::string& what) {
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] != kPoison) {
        fail(what + ": byte " + std::to_string(i) + " past the output was written");
        return false;
      }
    }
    return true;
  }

  // A new registration of device @p d, its bytes written on the thread's own stream and not waited for:
  // the engine must order its copies after them.
  void reregister(std::size_t d, std::size_t size) {
    offset_[d] = uniform(0, kSlack - 1);
    const std::uint64_t seed = fresh_seed();
    {
      const DeviceGuard guard(ordinals_[d]);
      pattern::fill_device(registered(d), size, seed, 0, stream(d));
    }
    engine_.set_device_buffer(d, registered(d), size, stream(d));
    content_[d] = Content::pattern(size, seed);
  }
  void reregister(std::size_t d) { reregister(d, random_size(config_.max_bytes)); }

  // Shrinks device @p d's registration to its first @p size bytes (same pointer, same bytes).
  void shrink(std::size_t d, std::size_t size) {
    if (content_[d].size() <= size) return;
    engine_.set_device_buffer(d, registered(d), size, stream(d));
    content_[d] = content_[d].range(0, size);
  }

  std::span<std::byte> host_area(bool pinned, std::size_t bytes) {
    std::byte* base = pinned ? pinned_.span().data() : host_.get();
    return {base + uniform(0, 63), bytes};
  }

  bool perform(Kind kind) {
    ++ops_;
    switch (kind) {
      case Kind::set_device_buffer: {
        const std::size_t d = uniform(0, count_ - 1);
        reregister(d);
        tally_.add("set_device_buffer", 0);
        return true;
      }
      case Kind::gather_blocking:
      case Kind::gather_all:
        return gather(kind == Kind::gather_all);
      case Kind::gather_into:
        return gather_into();
      case Kind::gather_to_device:
        return gather_to_device();
      case Kind::copy_buffer:
        return copy_buffer();
      case Kind::copy_device_buffer:
        return copy_device_buffer();
      case Kind::broadcast:
        return broadcast();
      case Kind::broadcast_from_device:
        return broadcast_from_device();
      case Kind::gather_slices:
        return gather_slices();
    }
    return true;
  }

  bool gather(bool all) {
    const std::size_t dst = uniform(0, count_ - 1);
    what_ = all ? std::string("gather_all") : "gather_blocking to " + std::to_string(dst);
    const std::vector<HostBuffer> out = all ? engine_.gather_all() : engine_.gather_blocking(dst);
    if (out.size() != (all ? count_ : count_ - 1)) {
      fail(std::to_string(out.size()) + " entries");
      return false;
    }
    std::size_t bytes = 0;
    for (std::size_t j = 0; j < out.size(); ++j) {
      const std::size_t src = all || j < dst ? j : j + 1;
      if (!check_host(out[j].span(), content_[src], "entry of device " + std::to_string(src))) return false;
      bytes += out[j].size();
    }
    tally_.add(all ? "gather_all" : "gather_blocking", bytes);
    return true;
  }

  bool gather_into() {
    const bool pinned = coin();
    std::optional<std::size_t> skip;
    if (uniform(0, 2) == 0) skip = uniform(0, count_ - 1);
    std::size_t total = 0;
    for (std::size_t d = 0; d < count_; ++d) total += skip == d ? 0 : content_[d].size();
    const std::size_t extra = uniform(0, 63);
    const std::span<std::byte> out = host_area(pinned, total + extra);
    what_ = std::string("gather_into ") + (pinned ? "pinned" : "pageable") + " of " + std::to_string(total) +
            " bytes";
    std::memset(out.data(), static_cast<int>(kPoison), out.size());
    const std::vector<GatherPiece> pieces = engine_.gather_into(out, skip);
    std::size_t offset = 0;
    for (const GatherPiece& p : pieces) {
      if (p.size == 0) continue;
      if (p.offset != offset || p.size != content_[p.device].size() || skip == p.device) {
        fail("piece of device " + std::to_string(p.device) + " at " + std::to_string(p.offset) + " of " +
             std::to_string(p.size) + " bytes, expected at " + std::to_string(offset));
        return false;
      }
      if (!check_host(out.subspan(p.offset, p.size), content_[p.device],
                      "device " + std::to_string(p.device))) {
        return false;
      }
      offset += p.size;
    }
    if (offset != total) {
      fail("pieces cover " + std::to_string(offset) + " bytes");
      return false;
    }
    if (!check_poison(out.subspan(total), "gather_into")) return false;
    tally_.add(std::string("gather_into/") + (pinned ? "pinned" : "pageable"), total);
    return true;
  }

  bool gather_to_device() {
    const std::size_t dst = uniform(0, count_ - 1);
    std::size_t total = 0;
    for (const Content& c : content_) total += c.size();
    if (!outputs_[dst])
      outputs_[dst] = std::make_unique<DeviceMemory>(ordinals_[dst], count_ * config_.max_bytes + 2 * kSlack);
    const std::size_t offset = uniform(0, kSlack - 1);
    const std::size_t capacity = total + uniform(0, kSlack - 1);
    std::byte* out = outputs_[dst]->get() + offset;
    what_ = "gather_to_device " + std::to_string(dst) + " of " + std::to_string(total) + " bytes";
    const DeviceGuard guard(ordinals_[dst]);
    cuda_check(cudaMemsetAsync(out, static_cast<int>(kPoison), capacity, stream(dst)), "cudaMemsetAsync");
    cuda_check(cudaStreamSynchronize(stream(dst)), "cudaStreamSynchronize");
    const std::vector<GatherPiece> pieces = engine_.gather_to_device(dst, out, capacity);
    std::size_t offset_now = 0;
    for (const GatherPiece& p : pieces) {
      if (p.size == 0) continue;
      if (p.offset != offset_now || p.size != content_[p.device].size()) {
        fail("piece of device " + std::to_string(p.device) + " at " + std::to_string(p.offset));
        return false;
      }
      const std::size_t bad = content_[p.device].mismatches_device(out + p.offset, stream(dst));
      if (bad != 0) {
        fail(std::to_string(bad) + " bytes of device " + std::to_string(p.device) + " wrong");
        return false;
      }
      offset_now += p.size;
    }
    std::vector<std::byte> tail(capacity - total);
    cuda_check(cudaMemcpy(tail.data(), out + total, tail.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
    if (offset_now != total || !check_poison(tail, "gather_to_device")) return false;
    tally_.add("gather_to_device", total);
    return true;
  }

  bool copy_buffer() {
    const std::size_t src = uniform(0, count_ - 1);
    const std::size_t dst = uniform(0, count_ - 1);
    const bool pinned = coin();
    const std::size_t bytes = random_size(content_[dst].size());
    const std::uint64_t seed = fresh_seed();
    const std::span<std::byte> data = host_area(pinned, bytes);
    pattern::fill_host(data, seed);
    what_ = std::string("copy_buffer ") + (pinned ? "pinned " : "pageable ") + std::to_string(bytes) +
            " bytes " + std::to_string(src) + " -> " + std::to_string(dst);
    engine_.copy_buffer(src, dst, data);
    content_[dst].overwrite_prefix(Content::pattern(bytes, seed));
    if (!check_device(dst, "destination")) return false;
    tally_.add(std::string("copy_buffer/") + (pinned ? "pinned" : "pageable"), bytes);
    return true;
  }

  bool copy_device_buffer() {
    const std::size_t src = uniform(0, count_ - 1);
    const std::size_t dst = (src + uniform(1, count_ - 1)) % count_;
    CopyPath path = std::array{CopyPath::automatic, CopyPath::peer, CopyPath::staged}[uniform(0, 2)];
    if (path == CopyPath::peer && !manager_->peer_enabled(src, dst)) path = CopyPath::staged;
    const char* name = path == CopyPath::automatic ? "automatic" : path == CopyPath::peer ? "peer" : "staged";
    shrink(src, content_[dst].size());
    what_ = std::string("copy_device_buffer ") + name + " of " + std::to_string(content_[src].size()) +
            " bytes " + std::to_string(src) + " -> " + std::to_string(dst);
    engine_.copy_device_buffer(src, dst, path);
    content_[dst].overwrite_prefix(content_[src]);
    if (!check_device(dst, "destination") || !check_device(src, "source")) return false;
    tally_.add(std::string("copy_device_buffer/") + name, content_[src].size());
    return true;
  }

  bool broadcast() {
    std::size_t room = config_.max_bytes;
    for (const Content& c : content_) room = std::min(room, c.size());
    const bool pinned = coin();
    HostBroadcastPath path = std::array{HostBroadcastPath::automatic, HostBroadcastPath::per_device,
                                        HostBroadcastPath::scatter_allgather}[uniform(0, 2)];
    if (path == HostBroadcastPath::scatter_allgather && count_ > 1 && !manager_->all_peers_enabled()) {
      path = HostBroadcastPath::per_device;
    }
    const char* name = path == HostBroadcastPath::automatic    ? "automatic"
                       : path == HostBroadcastPath::per_device ? "per_device"
                                                               : "scatter_allgather";
    const std::size_t bytes = random_size(room);
    const std::uint64_t seed = fresh_seed();
    const std::span<std::byte> data = host_area(pinned, bytes);
    pattern::fill_host(data, seed);
    what_ = std::string("broadcast ") + name + (pinned ? " pinned " : " pageable ") + std::to_string(bytes) +
            " bytes";
    engine_.broadcast(data, path);
    for (std::size_t d = 0; d < count_; ++d) {
      content_[d].overwrite_prefix(Content::pattern(bytes, seed));
      if (!check_device(d, "device " + std::to_string(d))) return false;
    }
    tally_.add(std::string("broadcast/") + name, bytes * count_);
    return true;
  }

  bool broadcast_from_device() {
    const std::size_t root = uniform(0, count_ - 1);
    DeviceBroadcastPath path = std::array{DeviceBroadcastPath::automatic, DeviceBroadcastPath::peer,
                                          DeviceBroadcastPath::nccl}[uniform(0, 2)];
    if (path == DeviceBroadcastPath::nccl && !manager_->nccl_available()) path = DeviceBroadcastPath::peer;
    const char* name = path == DeviceBroadcastPath::automatic ? "automatic"
                       : path == DeviceBroadcastPath::peer    ? "peer"
                                                              : "nccl";
    std::size_t room = content_[root].size();
    for (const Content& c : content_) room = std::min(room, c.size());
    shrink(root, room);
    what_ = std::string("broadcast_from_device ") + name + " root " + std::to_string(root) + " of " +
            std::to_string(room) + " bytes";
    engine_.broadcast_from_device(root, path);
    for (std::size_t d = 0; d < count_; ++d) {
      if (d != root) content_[d].overwrite_prefix(content_[root]);
      if (!check_device(d, "device " + std::to_string(d))) return false;
    }
    tally_.add(std::string("broadcast_from_device/") + name, room * (count_ - 1));
    return true;
  }

  bool gather_slices() {
    const bool pinned = coin();
    const std::size_t n = uniform(1, 32);
    std::vector<DeviceSlice> slices;
    std::vector<Content> expected;
    std::size_t total = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t d = uniform(0, count_ - 1);
      const std::size_t size = content_[d].size();
      const std::size_t begin = size == 0 ? 0 : uniform(0, size - 1);
      const std::size_t len = random_size(std::min<std::size_t>(size - begin, 256 * kKiB));
      slices.push_back({d, len == 0 ? nullptr : registered(d) + begin, len});
      expected.push_back(content_[d].range(begin, len));
      total += len;
    }
    // gather_slices waits for nothing registered: the fills on the thread's streams must be done.
    for (std::size_t d = 0; d < count_; ++d)
      cuda_check(cudaStreamSynchronize(stream(d)), "cudaStreamSynchronize");
    const std::size_t extra = uniform(0, 63);
    const std::span<std::byte> out = host_area(pinned, total + extra);
    std::memset(out.data(), static_cast<int>(kPoison), out.size());
    what_ = std::string("gather_slices ") + (pinned ? "pinned " : "pageable ") + std::to_string(n) +
            " slices, " + std::to_string(total) + " bytes";
    const std::size_t written = engine_.gather_slices(slices, out);
    if (written != total) {
      fail("returned " + std::to_string(written));
      return false;
    }
    std::size_t offset = 0;
    for (std::size_t k = 0; k < n; ++k) {
      if (!check_host(out.subspan(offset, slices[k].size), expected[k], "slice " + std::to_string(k)))
        return false;
      offset += slices[k].size;
    }
    if (!check_poison(out.subspan(total), "gather_slices")) return false;
    tally_.add(std::string("gather_slices/") + (pinned ? "pinned" : "pageable"), total);
    return true;
  }

  const Config& config_;
  std::size_t index_;
  std::mt19937_64 rng_;
  std::shared_ptr<MultiGpuManager> manager_;
  std::vector<std::unique_ptr<DeviceMemory>> memory_;   // the registered buffers, one per device
  std::vector<std::unique_ptr<DeviceMemory>> outputs_;  // gather_to_device outputs, made on first use
  InterGpuTransfer engine_;                             // destroyed before the memory it points to
  std::vector<int> ordinals_;
  std::size_t count_;
  std::unique_ptr<std::byte[]> host_;  // pageable
  PinnedMemory pinned_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::size_t> offset_;
  std::vector<Content> content_;
  GpuStress& test_;
  Tally tally_;
  std::uint64_t seeds_ = 0;
  std::size_t ops_ = 0;
  std::string what_;
};

// Prepared buffers of one device for the shared phase: distinct sizes, so a gathered entry's size says
// which one it is.
struct Candidate {
  std::unique_ptr<DeviceMemory> memory;
  std::size_t size;
  std::uint64_t seed;
};

TEST_F(GpuStress, EveryOperationFromManyThreadsDeliversEveryByte) {
  const Config& cfg = config_;
  progress_ = std::vector<std::atomic<std::size_t>>(cfg.threads);
  doing_ = std::vector<std::atomic<const char*>>(cfg.threads);
  for (auto& d : doing_) d = "starting";
  const auto state = [this, &cfg] {
    std::ostringstream text;
    for (std::size_t t = 0; t < cfg.threads; ++t) {
      text << "  thread " << t << ": " << progress_[t].load() << " of " << cfg.ops << " operations done, now "
           << doing_[t].load() << "\n";
    }
    return text.str();
  };
  const Watchdog watchdog(std::chrono::seconds(cfg.timeout_s), "GpuStress", state);
  std::vector<int> ordinals;
  for (std::size_t i = 0; i < device_count(); ++i) ordinals.push_back(ordinal(i));
  std::cout << "[ stress   ] " << cfg.threads << " threads x " << cfg.ops << " operations on "
            << device_count() << " device(s), sizes 0.." << cfg.max_bytes << " bytes, seed " << cfg.seed
            << ", peers " << (manager().all_peers_enabled() ? "all" : "not all") << ", NCCL "
            << (manager().nccl_available() ? "yes" : "no") << std::endl;
  const auto start = std::chrono::steady_clock::now();

  // Phase 1: one engine per thread over the shared manager.
  const auto errors = run_threads(cfg.threads, [&](std::size_t t) {
    Worker worker(*this, manager_, cfg, t, ordinals);
    worker.run(progress_[t], doing_[t]);
    const std::lock_guard lock(mutex_);
    tally_.merge(worker.tally());
  });
  const auto phase1 = std::chrono::steady_clock::now();

  // Phase 2: one engine shared by every thread; registrations race gathers.
  std::vector<std::vector<Candidate>> candidates(device_count());
  std::mt19937_64 rng(cfg.seed);
  for (std::size_t d = 0; d < device_count(); ++d) {
    for (std::size_t k = 0; k < 3; ++k) {
      std::size_t size =
          std::uniform_int_distribution<std::size_t>(0, std::min<std::size_t>(cfg.max_bytes, 8 * kMiB))(rng);
      auto taken = [&](std::size_t s) {
        return std::any_of(candidates[d].begin(), candidates[d].end(),
                           [s](const Candidate& c) { return c.size == s; });
      };
      while (taken(size)) ++size;  // distinct sizes
      Candidate c{std::make_unique<DeviceMemory>(ordinal(d), size), size, other_seed(100 * d + k)};
      fill_device(ordinal(d), c.memory->get(), size, c.seed);
      candidates[d].push_back(std::move(c));
    }
    xfer().set_device_buffer(d, candidates[d][0].memory->get(), candidates[d][0].size);
  }
  const std::size_t shared_ops = std::max<std::size_t>(1, cfg.ops / 4);
  auto which = [&](std::size_t d, std::size_t size) -> const Candidate* {
    for (const Candidate& c : candidates[d]) {
      if (c.size == size) return &c;
    }
    return nullptr;
  };
  const auto shared_errors = run_threads(cfg.threads, [&](std::size_t t) {
    std::mt19937_64 r(cfg.seed * 7919 + t);
    Tally local;
    std::vector<std::byte> into;
    const bool registrar = cfg.threads > 1 && t % 4 == 0;
    for (std::size_t op = 0; op < shared_ops; ++op) {
      const std::size_t d = r() % device_count();
      const auto fail = [&](const std::string& why) {
        record("shared phase, thread " + std::to_string(t) + " op " + std::to_string(op) + ": " + why);
      };
      if (registrar || (cfg.threads == 1 && op % 2 == 0)) {
        doing_[t] = "shared set_device_buffer";
        const Candidate& c = candidates[d][r() % candidates[d].size()];
        xfer().set_device_buffer(d, c.memory->get(), c.size);
        local.add("shared/set_device_buffer", 0);
        continue;
      }
      const int kind = static_cast<int>(r() % 3);
      if (kind == 2) {
        doing_[t] = "shared gather_into";
        into.resize(device_count() * std::min<std::size_t>(cfg.max_bytes, 8 * kMiB + 2));
        std::size_t bytes = 0;
        for (const GatherPiece& p : xfer().gather_into(into)) {
          const Candidate* c = which(p.device, p.size);
          if (c == nullptr ||
              pattern::count_mismatches_host(std::span(into).subspan(p.offset, p.size), c->seed) != 0) {
            fail("gather_into: device " + std::to_string(p.device) + " gave " + std::to_string(p.size) +
                 " bytes that are none of its registered buffers whole");
            return;
          }
          bytes += p.size;
        }
        local.add("shared/gather_into", bytes);
        continue;
      }
      doing_[t] = kind == 0 ? "shared gather_all" : "shared gather_blocking";
      const std::vector<HostBuffer> out = kind == 0 ? xfer().gather_all() : xfer().gather_blocking(d);
      std::size_t bytes = 0;
      for (std::size_t j = 0; j < out.size(); ++j) {
        const std::size_t src = kind == 0 || j < d ? j : j + 1;
        const Candidate* c = which(src, out[j].size());
        if (c == nullptr || pattern::count_mismatches_host(out[j].span(), c->seed) != 0) {
          fail("gather: device " + std::to_string(src) + " gave " + std::to_string(out[j].size()) +
               " bytes that are none of its registered buffers whole");
          return;
        }
        bytes += out[j].size();
      }
      local.add(kind == 0 ? "shared/gather_all" : "shared/gather_blocking", bytes);
    }
    doing_[t] = "done";
    const std::lock_guard lock(mutex_);
    tally_.merge(local);
  });
  const auto end = std::chrono::steady_clock::now();

  EXPECT_TRUE(errors.empty()) << errors.size() << " threads threw in phase 1; first: " << errors.front();
  EXPECT_TRUE(shared_errors.empty()) << shared_errors.size()
                                     << " threads threw in phase 2; first: " << shared_errors.front();
  for (const std::string& f : failures_) ADD_FAILURE() << f;

  // Nothing leased is left: every HostBuffer and staging chunk went back.
  xfer_.reset();
  for (std::size_t i = 0; i < device_count(); ++i) {
    const DeviceGuard guard(ordinal(i));
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  const PoolStats pool = manager().pinned_pool().stats();
  EXPECT_EQ(pool.in_use, 0u) << "pinned bytes still leased at the end";

  std::size_t ops = 0;
  std::size_t bytes = 0;
  std::cout << "[ stress   ] " << std::left << std::setw(36) << "operation" << std::right << std::setw(8)
            << "count" << std::setw(16) << "bytes"
            << "\n";
  for (const auto& [kind, v] : tally_.by_kind) {
    std::cout << "[ stress   ] " << std::left << std::setw(36) << kind << std::right << std::setw(8)
              << v.first << std::setw(16) << v.second << "\n";
    std::string key = "ops_" + kind;
    std::replace(key.begin(), key.end(), '/', '_');  // property names are XML attribute names
    RecordProperty(key, std::to_string(v.first));
    ops += v.first;
    bytes += v.second;
  }
  const double seconds = std::chrono::duration<double>(end - start).count();
  std::cout << "[ stress   ] total: " << ops << " operations, " << bytes << " bytes moved (" << std::fixed
            << std::setprecision(1) << static_cast<double>(bytes) / 1e9 << " GB) in " << seconds
            << " s (phase 1 " << std::chrono::duration<double>(phase1 - start).count()
            << " s); wrong bytes: " << (failures_.empty() ? "0" : "SOME")
            << "; pinned pool at the end: in use " << pool.in_use << ", cached " << pool.cached
            << ", pending " << pool.pending << ", peak in use " << pool.peak_in_use << ", allocations "
            << pool.allocations << std::endl;
  RecordProperty("threads", std::to_string(cfg.threads));
  RecordProperty("ops_per_thread", std::to_string(cfg.ops));
  RecordProperty("devices", std::to_string(device_count()));
  RecordProperty("operations", std::to_string(ops));
  RecordProperty("bytes_moved", std::to_string(bytes));
  RecordProperty("seconds", std::to_string(seconds));
  RecordProperty("pool_in_use_at_end", std::to_string(pool.in_use));
  RecordProperty("failures", std::to_string(failures_.size()));
}

}  // namespace
}  // namespace gpuxfer::test
