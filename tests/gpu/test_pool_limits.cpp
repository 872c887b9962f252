// Limits: a manager whose pinned pool holds only 8 chunks (8 MiB with 1 MiB chunks) while the data is
// 64 MiB. Staged and pageable paths go through chunk by chunk and deliver every byte; what has to be
// held whole in pinned memory (a gather's results, a pageable gather_slices' packed bytes) fails with
// Errc::out_of_memory naming the limit, and leaves the registry, the pool and the device data as they
// were. Several threads at once either succeed or fail cleanly. Every test runs under a watchdog: a
// deadlock fails it with a message. Under GPUXFER_TEST_MAX_BYTES the sizes shrink together (data,
// chunk = data / 64, limit = 8 chunks), so the sanitizer runs try the same shapes.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>

#include "common/paths.hpp"
#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr auto kLimitSeconds = std::chrono::seconds(120);
constexpr std::size_t kTail = 4096 + 5;  // bytes past the data in each destination, which must not change

struct Scale {
  std::size_t data;   // bytes moved (odd, so the last chunk is partial)
  std::size_t chunk;  // Options::chunk_bytes
  std::size_t limit;  // Options::pool_limit_bytes
};

Scale scale() {
  const std::size_t big = std::min<std::size_t>(64 * kMiB, test_max_bytes().value_or(64 * kMiB));
  const std::size_t chunk = std::max<std::size_t>(4096, big / 64 / 4096 * 4096);
  return {big - 5, chunk, 8 * chunk};
}

template <class Base>
class LimitsTest : public Base {
 protected:
  [[nodiscard]] Options options() const override {
    Options opts = Base::options();
    opts.chunk_bytes = scale().chunk;
    opts.pool_limit_bytes = scale().limit;
    return opts;
  }

  void SetUp() override {
    Base::SetUp();
    if (this->IsSkipped()) return;
    s_ = scale();
    if (s_.data <= 2 * s_.limit) GTEST_SKIP() << "GPUXFER_TEST_MAX_BYTES leaves no room above the pool limit";
  }

  // What the limit tests promise about the pool after every operation, failed or not.
  void expect_pool_within_its_limit(const std::string& what) {
    const PoolStats stats = this->manager().pinned_pool().stats();
    EXPECT_EQ(stats.in_use, 0u) << what << ": pinned memory still leased";
    EXPECT_LE(stats.peak_in_use, s_.limit) << what << ": more pinned memory leased than the limit";
    EXPECT_LE(stats.in_use + stats.cached + stats.pending, s_.limit)
        << what << ": the pool holds more than its limit";
  }

  ::testing::AssertionResult out_of_memory(const std::function<void()>& call) {
    return throws_error(call, Errc::out_of_memory,
                        "pinned pool limit of " + std::to_string(s_.limit) + " bytes");
  }

  std::vector<std::optional<RegisteredBuffer>> registry() {
    std::vector<std::optional<RegisteredBuffer>> out;
    for (std::size_t i = 0; i < this->device_count(); ++i) out.push_back(this->xfer().device_buffer(i));
    return out;
  }

  void expect_registry(const std::vector<std::optional<RegisteredBuffer>>& before, const std::string& what) {
    const auto now = registry();
    for (std::size_t i = 0; i < now.size(); ++i) {
      ASSERT_EQ(now[i].has_value(), before[i].has_value()) << what << ": device " << i;
      if (!now[i]) continue;
      EXPECT_EQ(now[i]->ptr, before[i]->ptr) << what << ": device " << i;
      EXPECT_EQ(now[i]->size, before[i]->size) << what << ": device " << i;
    }
  }

  Scale s_{};
};

using GpuLimits = LimitsTest<GpuTest>;
using MultiGpuLimits = LimitsTest<MultiGpuTest>;

// A lease that lets a cached block go to stay under the limit returns while a slow kernel still runs:
// cudaFreeHost waits for the work queued on every stream of the device (measured on the one-GPU runner),
// which a lease inside a stream-ordered operation must not.
TEST_F(GpuLimits, ALeaseThatLetsACachedBlockGoWaitsForNoGpuWork) {
  PinnedPool& pool = manager().pinned_pool();
  pool.trim();
  { const HostBuffer held = pool.acquire(s_.limit - s_.chunk); }  // cached once dropped
  ASSERT_GT(pool.stats().cached, 0u);
  DeviceMemory& scratch = allocate(0, kMiB);
  const Stream busy(ordinal(0));
  {
    const DeviceGuard guard(ordinal(0));
    pattern::fill_device_slow(scratch.get(), scratch.size(), 1, 200'000'000, busy.get());
  }
  ASSERT_TRUE(still_running(ordinal(0), busy.get(), "the slow kernel before the lease"));
  {
    // Two chunks: the cached block is too large to serve them (it would waste more than as much again),
    // and with it the pool would pass its limit, so it goes.
    const HostBuffer small = pool.acquire(2 * s_.chunk);
    EXPECT_TRUE(still_running(ordinal(0), busy.get(), "the slow kernel after the lease"));
    EXPECT_EQ(pool.stats().cached, 0u);
  }
  busy.synchronize();
  expect_pool_within_its_limit("a lease that let a cached block go");
}

TEST_F(GpuLimits, BroadcastFromPageableGoesThroughInChunks) {
  const Watchdog watchdog(kLimitSeconds, "GpuLimits.BroadcastFromPageableGoesThroughInChunks");
  std::vector<DeviceMemory*> memory;
  for (std::size_t i = 0; i < device_count(); ++i)
    memory.push_back(&register_pattern(i, s_.data + kTail + 13 * i));
  std::uint64_t generation = 0;
  for (const HostBroadcastPath path : kHostBroadcastPaths) {
    if (path == HostBroadcastPath::scatter_allgather && device_count() > 1 && !manager().all_peers_enabled())
      continue;
    const std::uint64_t data_seed = other_seed(++generation);
    const auto data = pattern_bytes(s_.data, data_seed);
    ASSERT_NO_THROW(xfer().broadcast(data, path)) << path_name(path);
    for (std::size_t i = 0; i < memory.size(); ++i) {
      const std::string what = path_name(path) + " broadcast under the limit, device " + std::to_string(i);
      EXPECT_TRUE(device_matches(memory[i]->ordinal(), memory[i]->get(), s_.data, data_seed, 0, what));
      EXPECT_TRUE(device_matches(memory[i]->ordinal(), memory[i]->get() + s_.data,
                                 memory[i]->size() - s_.data, seed(i), s_.data,
                                 what + ", bytes past the data"));
    }
    expect_pool_within_its_limit(path_name(path) + " broadcast");
  }
}

TEST_F(GpuLimits, CopyBufferFromPageableGoesThroughInChunks) {
  const Watchdog watchdog(kLimitSeconds, "GpuLimits.CopyBufferFromPageableGoesThroughInChunks");
  for (std::size_t dst = 0; dst < device_count(); ++dst) {
    DeviceMemory& memory = register_pattern(dst, s_.data + kTail);
    const std::uint64_t data_seed = other_seed(dst);
    const auto data = pattern_bytes(s_.data, data_seed);
    ASSERT_NO_THROW(xfer().copy_buffer(0, dst, data)) << "into device " << dst;
    const std::string what = "copy_buffer under the limit into device " + std::to_string(dst);
    EXPECT_TRUE(device_matches(memory.ordinal(), memory.get(), s_.data, data_seed, 0, what));
    EXPECT_TRUE(
        device_matches(memory.ordinal(), memory.get() + s_.data, kTail, seed(dst), s_.data, what + ", tail"));
    expect_pool_within_its_limit(what);
  }
}

// Each pageable source holds a staging ring while it downloads, halved while the pool cannot lease it,
// down to 4 chunks, so at most limit / (4 chunks) = 2 sources fit at once: the test registers two (fewer
// on one GPU). See docs/RELIABILITY.md, "Limits".
TEST_F(GpuLimits, GatherIntoPageableGoesThroughInChunks) {
  const Watchdog watchdog(kLimitSeconds, "GpuLimits.GatherIntoPageableGoesThroughInChunks");
  const std::size_t sources = std::min<std::size_t>(device_count(), 2);
  std::vector<GatherPiece> expected;
  std::size_t total = 0;
  for (std::size_t i = 0; i < sources; ++i) {
    register_pattern(i, s_.data + 13 * i);
    expected.push_back({i, 0, s_.data + 13 * i});
    total += s_.data + 13 * i;
  }
  std::vector<std::byte> out(total + kTail, kPoison);
  std::vector<GatherPiece> pieces;
  ASSERT_NO_THROW(pieces = xfer().gather_into(out));
  EXPECT_TRUE(pieces_are_concatenation(pieces, expected));
  for (const GatherPiece& p : pieces) {
    if (p.size == 0) continue;
    EXPECT_TRUE(host_matches(std::span(out).subspan(p.offset, p.size), seed(p.device), 0,
                             "gather_into under the limit, device " + std::to_string(p.device)));
  }
  EXPECT_TRUE(host_is_poison(std::span(out).subspan(total), "gather_into output past the data"));
  expect_pool_within_its_limit("gather_into");
}

TEST_F(GpuLimits, GatherAboveTheLimitIsOutOfMemoryAndChangesNothing) {
  const Watchdog watchdog(kLimitSeconds, "GpuLimits.GatherAboveTheLimitIsOutOfMemoryAndChangesNothing");
  std::vector<DeviceMemory*> memory;
  for (std::size_t i = 0; i < device_count(); ++i) memory.push_back(&register_pattern(i, s_.data + 13 * i));
  const auto before = registry();

  EXPECT_TRUE(out_of_memory([&] { (void)xfer().gather_all(); })) << "gather_all";
  expect_pool_within_its_limit("after a gather_all over the limit");
  expect_registry(before, "after a gather_all over the limit");
  for (std::size_t dst = 0; device_count() > 1 && dst < device_count(); ++dst) {
    EXPECT_TRUE(out_of_memory([&] { (void)xfer().gather_blocking(dst); })) << "gather_blocking to " << dst;
    EXPECT_TRUE(out_of_memory([&] { (void)xfer().gather(dst); })) << "gather to " << dst;
    expect_pool_within_its_limit("after gathers to " + std::to_string(dst) + " over the limit");
    expect_registry(before, "after gathers to " + std::to_string(dst) + " over the limit");
  }
  for (std::size_t i = 0; i < memory.size(); ++i) {
    EXPECT_TRUE(device_matches(memory[i]->ordinal(), memory[i]->get(), memory[i]->size(), seed(i), 0,
                               "device " + std::to_string(i) + " after gathers over the limit"));
  }

  // The engine and the pool still work: a gather that fits.
  for (std::size_t i = 0; i < device_count(); ++i)
    xfer().set_device_buffer(i, memory[i]->get(), s_.chunk + i);
  std::vector<HostBuffer> out;
  ASSERT_NO_THROW(out = xfer().gather_all()) << "a gather within the limit after the failures";
  ASSERT_EQ(out.size(), device_count());
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_TRUE(
        host_matches(out[i].span(), seed(i), 0, "device " + std::to_string(i) + " after the failures"));
  }
  out.clear();
  expect_pool_within_its_limit("after a gather within the limit");
}

// Pageable output: the packed bytes are staged whole, so above the limit it is out_of_memory; pinned
// output needs no staging and goes through.
TEST_F(GpuLimits, GatherSlicesAboveTheLimit) {
  const Watchdog watchdog(kLimitSeconds, "GpuLimits.GatherSlicesAboveTheLimit");
  DeviceMemory& memory = allocate(0, s_.data);
  fill_device(memory.ordinal(), memory.get(), memory.size(), seed(0));
  // Two slices, swapped: the output is [second half, first half].
  const std::size_t half = s_.data / 2;
  const DeviceSlice slices[] = {{0, memory.get() + half, s_.data - half}, {0, memory.get(), half}};
  std::vector<std::byte> pageable(s_.data, kPoison);
  EXPECT_TRUE(out_of_memory([&] { (void)xfer().gather_slices(slices, pageable); })) << "pageable output";
  EXPECT_TRUE(host_is_poison(pageable, "pageable output of a refused gather_slices"));
  expect_pool_within_its_limit("after a gather_slices over the limit");

  PinnedMemory pinned(s_.data);
  std::fill(pinned.span().begin(), pinned.span().end(), kPoison);
  std::size_t written = 0;
  ASSERT_NO_THROW(written = xfer().gather_slices(slices, pinned.span())) << "pinned output";
  EXPECT_EQ(written, s_.data);
  EXPECT_TRUE(host_matches(pinned.span().first(s_.data - half), seed(0), half, "second half, first"));
  EXPECT_TRUE(host_matches(pinned.span().subspan(s_.data - half), seed(0), 0, "first half, second"));
  expect_pool_within_its_limit("after a pinned gather_slices");
}

// Four engines on one manager, each broadcasting and gathering its own 64 MiB at once through the
// 8 MiB pool: each operation delivers every byte or throws out_of_memory; nothing else, no hang; and some
// go through. Before each gather the devices get a seed each, so that a piece from the wrong device shows.
TEST_F(GpuLimits, ConcurrentLargeOperationsSucceedOrFailCleanly) {
  constexpr std::size_t kThreads = 4;
  constexpr int kRounds = 3;
  const Watchdog watchdog(kLimitSeconds, "GpuLimits.ConcurrentLargeOperationsSucceedOrFailCleanly");
  std::atomic<std::size_t> succeeded{0};
  std::atomic<std::size_t> refused{0};
  std::mutex mutex;
  std::vector<std::string> wrong;
  auto record = [&](const std::string& what) {
    const std::lock_guard lock(mutex);
    wrong.push_back(what);
  };
  const auto errors = run_threads(kThreads, [&](std::size_t t) {
    std::vector<DeviceMemory> memory;
    for (std::size_t i = 0; i < device_count(); ++i) memory.emplace_back(ordinal(i), s_.data);
    InterGpuTransfer engine(manager_);  // destroyed before the memory it points to
    for (std::size_t i = 0; i < device_count(); ++i) engine.set_device_buffer(i, memory[i].get(), s_.data);
    std::vector<std::byte> out(s_.data * device_count());
    std::vector<GatherPiece> expected;
    for (std::size_t i = 0; i < device_count(); ++i) expected.push_back({i, 0, s_.data});
    for (int round = 0; round < kRounds; ++round) {
      const std::uint64_t run = run_ + 100 * t + static_cast<std::uint64_t>(round);
      const std::uint64_t data_seed = pattern::seed_for(run, 5);
      const auto data = pattern_bytes(s_.data, data_seed);
      const std::string who = "thread " + std::to_string(t) + " round " + std::to_string(round);
      try {
        engine.broadcast(data, HostBroadcastPath::per_device);
        ++succeeded;
      } catch (const Error& e) {
        if (e.code() != Errc::out_of_memory) throw;
        ++refused;
        continue;  // the devices' contents are unknown now: try again next round
      }
      for (std::size_t i = 0; i < device_count(); ++i) {
        const DeviceGuard guard(ordinal(i));
        const std::size_t bad =
            pattern::count_mismatches_device(memory[i].get(), s_.data, data_seed, 0, cudaStreamLegacy);
        if (bad != 0)
          record(who + ": broadcast left " + std::to_string(bad) + " bytes wrong on device " +
                 std::to_string(i));
      }
      for (std::size_t i = 0; i < device_count(); ++i) {
        fill_device(ordinal(i), memory[i].get(), s_.data, pattern::seed_for(run, 10 + i));
      }
      std::fill(out.begin(), out.end(), kPoison);
      try {
        const std::vector<GatherPiece> pieces = engine.gather_into(out);
        if (const auto same = pieces_are_concatenation(pieces, expected); !same)
          record(who + ": gather_into: " + same.message());
        for (std::size_t i = 0; i < device_count(); ++i) {
          const std::size_t bad = pattern::count_mismatches_host(std::span(out).subspan(i * s_.data, s_.data),
                                                                 pattern::seed_for(run, 10 + i));
          if (bad != 0)
            record(who + ": gather_into got " + std::to_string(bad) + " bytes wrong of device " +
                   std::to_string(i));
        }
        ++succeeded;
      } catch (const Error& e) {
        if (e.code() != Errc::out_of_memory) throw;
        ++refused;
      }
    }
  });
  EXPECT_TRUE(errors.empty()) << failures(errors);
  EXPECT_TRUE(wrong.empty()) << failures(wrong);
  EXPECT_GT(succeeded.load(), 0u) << "every operation was refused: the test saw no data";
  std::cout << "concurrent operations under an " << s_.limit << "-byte pool: " << succeeded
            << " went through, " << refused << " refused with out_of_memory" << std::endl;
  RecordProperty("succeeded", static_cast<int>(succeeded.load()));
  RecordProperty("refused", static_cast<int>(refused.load()));
  expect_pool_within_its_limit("after the concurrent operations");
}

TEST_F(MultiGpuLimits, StagedCopyGoesThroughInChunks) {
  const Watchdog watchdog(kLimitSeconds, "MultiGpuLimits.StagedCopyGoesThroughInChunks");
  for (const auto& [src, dst] : {std::pair<std::size_t, std::size_t>{0, 1}, {1, 0}}) {
    DeviceMemory& from = register_pattern(src, s_.data);
    DeviceMemory& to = register_pattern(dst, s_.data + kTail);
    ASSERT_NO_THROW(xfer().copy_device_buffer(src, dst, CopyPath::staged)) << src << " -> " << dst;
    const std::string what =
        "staged copy under the limit " + std::to_string(src) + " -> " + std::to_string(dst);
    EXPECT_TRUE(device_matches(to.ordinal(), to.get(), s_.data, seed(src), 0, what));
    EXPECT_TRUE(device_matches(to.ordinal(), to.get() + s_.data, kTail, seed(dst), s_.data, what + ", tail"));
    EXPECT_TRUE(device_matches(from.ordinal(), from.get(), s_.data, seed(src), 0, what + ", source"));
    expect_pool_within_its_limit(what);
  }
}

}  // namespace
}  // namespace gpuxfer::test
