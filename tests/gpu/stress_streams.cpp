// The stream-ordered phase of GpuStress (test_stress.cpp): each thread registers a buffer on every device
// with a producer stream of its own, and in every round the producers write a new generation right before
// a stream-ordered operation on the thread's caller stream and another one right behind it, with no host
// wait between. What the ordering promises, and what is checked byte for byte once the caller's stream is
// done: the operation sees the generation written before it (the registering stream's work at the time of
// the operation), never the one written behind it (that stream waits for the operation's reads and writes).
#include <random>
#include <string>

#include "gpu/stress_model.hpp"

namespace gpuxfer::test::stress {
namespace {

constexpr std::size_t kMaxStreamBytes = 4 * kMiB;  // small: the phase is about order, not bandwidth

class StreamWorker {
 public:
  StreamWorker(std::shared_ptr<MultiGpuManager> manager, const Config& config, std::size_t index,
               const std::vector<int>& ordinals, std::function<void(const std::string&)> record)
      : index_(index),
        rng_(config.seed * 7777 + index),
        engine_(std::move(manager)),
        ordinals_(ordinals),
        max_(std::max<std::size_t>(1, std::min(config.max_bytes, kMaxStreamBytes))),
        caller_(ordinals.front()),
        out_(ordinals.size() * max_),
        data_(max_),
        content_(ordinals.size()),
        record_(std::move(record)) {
    for (const int ordinal : ordinals_) {
      memory_.push_back(std::make_unique<DeviceMemory>(ordinal, max_));
      producers_.push_back(std::make_unique<Stream>(ordinal));
    }
    for (std::size_t d = 0; d < ordinals_.size(); ++d) reregister(d);
  }

  // One round: a generation before, one operation (and a gather to see it), a generation behind.
  bool round(std::size_t r, std::atomic<const char*>& doing) {
    round_ = r;
    if (rng_() % 8 == 0) reregister(rng_() % ordinals_.size());
    write_generation();
    const std::size_t n = ordinals_.size();
    const int kind = static_cast<int>(rng_() % (n > 1 ? 4 : 3));
    if (kind == 1) {
      doing = "streams gather_all_async";
      GatherHandle handle = engine_.gather_all_async(caller_.get());
      const std::vector<Content> expected = content_;
      write_generation();
      const std::vector<HostBuffer> results = handle.get();
      caller_.synchronize();
      for (std::size_t d = 0; d < n; ++d) {
        if (!check(expected[d], results[d].span(), "gather_all_async of device " + std::to_string(d))) return false;
      }
      tally_.add("streams/gather_all_async", total(expected));
      return true;
    }
    if (kind == 2) {
      doing = "streams broadcast_async";
      std::size_t smallest = max_;
      for (const Content& c : content_) smallest = std::min(smallest, c.size());
      const std::size_t len = 1 + rng_() % smallest;
      const std::uint64_t seed = next_seed();
      pattern::fill_host(data_.span().first(len), seed);
      engine_.broadcast_async(data_.span().first(len), caller_.get());
      for (Content& c : content_) c.overwrite_prefix(Content::pattern(len, seed));
      tally_.add("streams/broadcast_async", len * n);
    }
    if (kind == 3) {
      doing = "streams copy_device_buffer_async";
      const std::size_t src = rng_() % n;
      const std::size_t dst = (src + 1 + rng_() % (n - 1)) % n;
      if (content_[src].size() <= content_[dst].size()) {
        const CopyPath path = rng_() % 2 == 0 ? CopyPath::automatic : CopyPath::staged;
        TransferHandle handle = engine_.copy_device_buffer_async(src, dst, caller_.get(), path);
        content_[dst].overwrite_prefix(content_[src]);
        tally_.add("streams/copy_device_buffer_async", content_[src].size());
      }
    }
    // Every kind ends with a stream-ordered gather of every buffer, after what was queued before it.
    doing = "streams gather_into_async";
    const std::vector<GatherPiece> pieces = engine_.gather_into_async(out_.span(), caller_.get());
    const std::vector<Content> expected = content_;
    write_generation();
    caller_.synchronize();
    for (const GatherPiece& p : pieces) {
      const std::string what = "gather_into_async of device " + std::to_string(p.device);
      if (!check(expected[p.device], out_.span().subspan(p.offset, p.size), what)) return false;
    }
    tally_.add("streams/gather_into_async", total(expected));
    return true;
  }

  // The last generation, read back: nothing written behind an operation was lost or overtaken.
  bool finish() {
    caller_.synchronize();
    for (std::size_t d = 0; d < ordinals_.size(); ++d) {
      producers_[d]->synchronize();
      const DeviceGuard guard(ordinals_[d]);
      const std::size_t bad = content_[d].mismatches_device(memory_[d]->get(), producers_[d]->get());
      if (bad != 0) {
        fail("the last generation on device " + std::to_string(d) + ": " + std::to_string(bad) + " bytes wrong");
        return false;
      }
    }
    return true;
  }

  [[nodiscard]] const Tally& tally() const noexcept { return tally_; }

 private:
  std::uint64_t next_seed() { return pattern::seed_for(7'000'000 + index_ * 100'000 + ++generation_, 0); }

  // Every producer writes its whole buffer with a new seed, queued behind whatever the stream holds.
  void write_generation() {
    for (std::size_t d = 0; d < ordinals_.size(); ++d) {
      const std::uint64_t seed = next_seed();
      const DeviceGuard guard(ordinals_[d]);
      pattern::fill_device(memory_[d]->get(), content_[d].size(), seed, 0, producers_[d]->get());
      content_[d] = Content::pattern(content_[d].size(), seed);
    }
  }

  // The same memory again with a new size, on the same producer: the work in flight on it stays ordered.
  void reregister(std::size_t d) {
    const std::size_t size = 1 + rng_() % max_;
    const std::uint64_t seed = next_seed();
    {
      const DeviceGuard guard(ordinals_[d]);
      pattern::fill_device(memory_[d]->get(), size, seed, 0, producers_[d]->get());
    }
    content_[d] = Content::pattern(size, seed);
    engine_.set_device_buffer(d, memory_[d]->get(), size, producers_[d]->get());
    tally_.add("streams/set_device_buffer", 0);
  }

  bool check(const Content& want, std::span<const std::byte> got, const std::string& what) {
    const std::size_t bad = want.mismatches_host(got);
    if (bad == 0) return true;
    fail(what + ": " + std::to_string(bad) + " of " + std::to_string(want.size()) + " bytes wrong");
    return false;
  }

  static std::size_t total(const std::vector<Content>& contents) {
    std::size_t sum = 0;
    for (const Content& c : contents) sum += c.size();
    return sum;
  }

  void fail(const std::string& why) {
    record_("stream phase, thread " + std::to_string(index_) + " round " + std::to_string(round_) + ": " + why);
  }

  std::size_t index_;
  std::mt19937_64 rng_;
  InterGpuTransfer engine_;
  std::vector<int> ordinals_;
  std::size_t max_;
  Stream caller_;  // on the first device
  PinnedMemory out_;
  PinnedMemory data_;
  std::vector<std::unique_ptr<DeviceMemory>> memory_;
  std::vector<std::unique_ptr<Stream>> producers_;
  std::vector<Content> content_;
  std::function<void(const std::string&)> record_;
  std::uint64_t generation_ = 0;
  std::size_t round_ = 0;
  Tally tally_;
};

}  // namespace

Tally run_stream_worker(std::shared_ptr<MultiGpuManager> manager, const Config& config, std::size_t index,
                        const std::vector<int>& ordinals, std::atomic<std::size_t>& progress,
                        std::atomic<const char*>& doing, std::function<void(const std::string&)> record) {
  const auto fail = [&](const std::string& why) {
    record("stream phase, thread " + std::to_string(index) + ": " + why);
  };
  try {
    StreamWorker worker(std::move(manager), config, index, ordinals, record);
    const std::size_t rounds = std::max<std::size_t>(1, config.ops / 10);
    for (std::size_t r = 0; r < rounds; ++r) {
      if (!worker.round(r, doing)) return worker.tally();
      progress = r + 1;
    }
    doing = "streams finishing";
    (void)worker.finish();
    doing = "done";
    return worker.tally();
  } catch (const std::exception& e) {
    fail(std::string("threw: ") + e.what());
    return {};
  }
}

}  // namespace gpuxfer::test::stress
