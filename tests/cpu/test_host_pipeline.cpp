// The host side of the pageable pipeline, without a GPU: a ChunkPlan cuts a transfer into chunks that
// taper at the end where the pipeline waits on single workers, a CopyTeam runs its members on the workers
// while the calling thread goes on (the members wait for it here, so a team that ran on the caller would
// hang), joins them all, and queues all of its members or none when memory runs out; a PipelineStop keeps
// the first failure and releases every waiter.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <gpuxfer/testing/pattern.hpp>

#include "allocation_fault.hpp"
#include "engine/host_pipeline.hpp"
#include "memory/host_copy_workers.hpp"

namespace gpuxfer::test {
namespace {

using ::gpuxfer::detail::ChunkPlan;
using ::gpuxfer::detail::CopyTeam;
using ::gpuxfer::detail::HostCopyWorkers;
using ::gpuxfer::detail::PipelineStop;
using ::gpuxfer::detail::Taper;
using ::gpuxfer::detail::taper_least;

constexpr std::size_t kMiB = std::size_t{1} << 20;

std::vector<std::size_t> sizes_of(const ChunkPlan& plan) {
  std::vector<std::size_t> sizes;
  for (std::size_t k = 0; k < plan.count(); ++k) sizes.push_back(plan.size(k));
  return sizes;
}

// The chunks lie end to end from 0 to total(), none empty, none above largest().
void expect_tiles(const ChunkPlan& plan, std::size_t total) {
  ASSERT_EQ(plan.total(), total);
  std::size_t at = 0;
  for (std::size_t k = 0; k < plan.count(); ++k) {
    ASSERT_EQ(plan.offset(k), at) << "chunk " << k;
    ASSERT_GT(plan.size(k), 0u) << "chunk " << k;
    ASSERT_LE(plan.size(k), plan.largest()) << "chunk " << k;
    at += plan.size(k);
  }
  EXPECT_EQ(at, total);
}

TEST(CpuChunkPlan, WithoutATaperEveryChunkIsWholeButTheLast) {
  for (const std::size_t total :
       {std::size_t{0}, std::size_t{1}, std::size_t{4095}, 4 * kMiB, 10 * kMiB + 5}) {
    const ChunkPlan plan(total, 4 * kMiB);
    expect_tiles(plan, total);
    EXPECT_EQ(plan.count(), (total + 4 * kMiB - 1) / (4 * kMiB)) << total;
    for (std::size_t k = 0; k + 1 < plan.count(); ++k) EXPECT_EQ(plan.size(k), 4 * kMiB);
  }
}

// A download of 256 MiB in 4 MiB chunks with 8 workers: the chunk that does not fill first, whole chunks,
// then each chunk at most an eighth of the bytes after it (rounded up to 64 KiB), down to taper_least at
// the very end.
TEST(CpuChunkPlan, ADownloadTapersAtItsEnd) {
  const std::size_t total = 256 * kMiB;
  const ChunkPlan plan(total, 4 * kMiB, 8, Taper::at_end);
  expect_tiles(plan, total);
  const std::vector<std::size_t> sizes = sizes_of(plan);
  EXPECT_EQ(sizes.back(), taper_least);
  EXPECT_EQ(sizes.at(1), 4 * kMiB);
  std::size_t after = 0;
  for (std::size_t k = sizes.size(); k-- > 0;) {
    const std::size_t bound = std::max(taper_least, (after / 8 + (64 << 10) - 1) / (64 << 10) * (64 << 10));
    EXPECT_LE(sizes[k], bound) << "chunk " << k << " with " << after << " bytes after it";
    if (k > 0 && k + 1 < sizes.size()) {
      EXPECT_GE(sizes[k], sizes[k + 1]) << "chunk " << k;
    }
    after += sizes[k];
  }
  // The taper spans about workers x chunk bytes, in a few dozen chunks.
  EXPECT_LT(plan.count(), 64u + 40u);
  EXPECT_GT(plan.count(), 64u + 20u);
}

TEST(CpuChunkPlan, AnUploadTapersAtItsStartAsADownloadAtItsEnd) {
  for (const std::size_t total : {3 * kMiB, 17 * kMiB, 64 * kMiB + (64 << 10), 256 * kMiB}) {
    const ChunkPlan down(total, 4 * kMiB, 8, Taper::at_end);
    const ChunkPlan up(total, 4 * kMiB, 8, Taper::at_start);
    expect_tiles(up, total);
    std::vector<std::size_t> mirrored = sizes_of(down);
    std::reverse(mirrored.begin(), mirrored.end());
    EXPECT_EQ(sizes_of(up), mirrored) << total;
    EXPECT_EQ(up.size(0), taper_least) << total;
  }
}

// An odd total: every chunk but the last starts on a multiple of 64 KiB, and the last takes the odd bytes.
TEST(CpuChunkPlan, EveryChunkButTheLastStartsOnA64KiBMultiple) {
  for (const std::size_t total : {3 * kMiB + 7, 64 * kMiB + 4099, 256 * kMiB + 65535}) {
    for (const Taper taper : {Taper::at_end, Taper::at_start}) {
      const ChunkPlan plan(total, 4 * kMiB, 8, taper);
      expect_tiles(plan, total);
      for (std::size_t k = 0; k < plan.count(); ++k)
        EXPECT_EQ(plan.offset(k) % (64 << 10), 0u) << total << " chunk " << k;
      EXPECT_EQ(plan.size(plan.count() - 1) % (64 << 10), total % (64 << 10)) << total;
    }
  }
}

// Small transfers and small chunks stay untapered; odd totals tile exactly.
TEST(CpuChunkPlan, SmallTransfersAndSmallChunksDoNotTaper) {
  const ChunkPlan small(2 * taper_least, 4 * kMiB, 8, Taper::at_end);
  EXPECT_EQ(small.count(), 1u);
  const ChunkPlan tiny_chunks(64 * kMiB, 4096, 8, Taper::at_end);
  EXPECT_EQ(tiny_chunks.count(), 64 * kMiB / 4096);
  for (const std::size_t total : {2 * taper_least + 1, kMiB + 1, 5 * kMiB + 3, 33 * kMiB + 65537}) {
    for (const std::size_t workers : {std::size_t{1}, std::size_t{3}, std::size_t{16}}) {
      expect_tiles(ChunkPlan(total, 4 * kMiB, workers, Taper::at_end), total);
      expect_tiles(ChunkPlan(total, 4 * kMiB, workers, Taper::at_start), total);
    }
  }
}

TEST(CpuCopyTeam, MembersRunOnTheWorkersWhileTheCallerGoesOn) {
  HostCopyWorkers workers(4);
  ASSERT_EQ(workers.size(), 4u);
  std::atomic<bool> go{false};
  std::atomic<int> started{0};
  std::atomic<int> finished{0};
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> ran_on_caller{false};
  {
    CopyTeam team(workers, 4, [&] {
      if (std::this_thread::get_id() == caller) ran_on_caller = true;
      ++started;
      while (!go.load()) std::this_thread::yield();
      ++finished;
    });
    // Every member is running at once, and waits for this thread.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (started.load() < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    EXPECT_EQ(started.load(), 4);
    EXPECT_EQ(finished.load(), 0);
    go = true;
    team.join();
    EXPECT_EQ(finished.load(), 4);
    team.join();  // a second join returns at once
  }
  EXPECT_FALSE(ran_on_caller.load());
}

TEST(CpuCopyTeam, TheDestructorWaitsForEveryMember) {
  HostCopyWorkers workers(2);
  std::atomic<int> finished{0};
  {
    CopyTeam team(workers, 5, [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ++finished;
    });
  }
  EXPECT_EQ(finished.load(), 5);  // more members than workers: they queue, and all run
}

TEST(CpuCopyTeam, TheWorkersStillCopyAfterATeam) {
  HostCopyWorkers workers(3);
  {
    CopyTeam team(workers, 3, [] {});
  }
  // 4 MiB over 3 workers and the caller: pieces of 1 MiB. The pattern has no period, so a piece copied to
  // another piece's place shows.
  std::vector<std::byte> src(std::size_t{4} << 20), dst(src.size(), std::byte{0xA5});
  pattern::fill_host(src, 7);
  workers.copy(dst.data(), src.data(), src.size());
  EXPECT_EQ(pattern::count_mismatches_host(dst, 7), 0u);
}

// Running out of memory while the members are queued (the task queue grows by a block every 16 tasks
// here, so one of 64 members meets it): the constructor throws at once, and no member runs. Were some
// queued and then waited for, as they wait for their caller here, the constructor would never return.
TEST(CpuCopyTeam, AMemberThatCannotBeQueuedLeavesNoneQueuedAndThrows) {
  if (!allocation_faults_reach_the_library()) GTEST_SKIP() << library_allocates_on_its_own;
  HostCopyWorkers workers(4);
  std::atomic<bool> go{false};
  std::atomic<int> ran{0};
  std::function<void()> member = [&] {
    ++ran;
    while (!go.load()) std::this_thread::yield();
  };
  auto construction = std::async(std::launch::async, [&] {
    const AllocationFault fault(0);
    try {
      const CopyTeam team(workers, 64, std::move(member));
    } catch (const std::bad_alloc&) {
      return fault.thrown();
    }
    return std::size_t{0};
  });
  const bool returned = construction.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  go = true;  // lets the members a hung constructor waits for go, so the test ends either way
  EXPECT_TRUE(returned) << "the constructor waits for members that wait for its caller";
  EXPECT_GT(construction.get(), 0u) << "nothing ran out of memory: the test proves nothing here";
  EXPECT_EQ(ran.load(), 0);
  std::atomic<int> finished{0};
  {
    const CopyTeam team(workers, 4, [&] { ++finished; });
  }
  EXPECT_EQ(finished.load(), 4);  // the workers are all still there
}

// The same for a copy split over 20 workers: it throws, and no piece is left queued. Each piece's task
// allocates, so the eleventh fails with ten queued; those would run at the next wake-up of the workers,
// copy after the call has returned and count down its latch, which is gone. The copy runs on a thread of its
// own, ended before the workers wake, so that such pieces write to no live stack.
TEST(CpuHostCopyWorkers, ACopyWhosePiecesCannotBeQueuedLeavesNoneQueuedAndThrows) {
  if (!allocation_faults_reach_the_library()) GTEST_SKIP() << library_allocates_on_its_own;
  HostCopyWorkers workers(20);
  std::vector<std::byte> src(std::size_t{32} << 20), dst(src.size(), std::byte{0xA5});
  pattern::fill_host(src, 11);
  bool threw = false;
  std::size_t thrown = 0;
  std::thread([&] {
    const AllocationFault fault(10);
    try {
      workers.copy(dst.data(), src.data(), src.size());
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    thrown = fault.thrown();
  }).join();
  EXPECT_TRUE(threw);
  EXPECT_GT(thrown, 0u) << "nothing ran out of memory: the test proves nothing here";
  {
    const CopyTeam wake(workers, 20, [] {});
  }  // every worker wakes, and runs what was queued first
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(std::count(dst.begin(), dst.end(), std::byte{0xA5}), static_cast<std::ptrdiff_t>(dst.size()))
      << "pieces of the failed copy ran after it";
  workers.copy(dst.data(), src.data(), src.size());
  EXPECT_EQ(pattern::count_mismatches_host(dst, 11), 0u);
}

TEST(CpuPipelineStop, KeepsTheFirstFailureAndReleasesWaiters) {
  PipelineStop stop;
  EXPECT_FALSE(stop.stopped());
  EXPECT_FALSE(stop.failure());
  EXPECT_NO_THROW(stop.rethrow());
  std::atomic<bool> waiting{false};
  std::atomic<bool> released{false};
  std::jthread waiter([&] {
    waiting = true;
    released = !stop.wait_until([] { return false; });
  });
  while (!waiting.load()) std::this_thread::yield();
  try {
    throw std::runtime_error("first");
  } catch (...) {
    stop.fail(std::current_exception());
  }
  try {
    throw std::runtime_error("second");
  } catch (...) {
    stop.fail(std::current_exception());
  }
  waiter.join();
  EXPECT_TRUE(released.load());
  EXPECT_TRUE(stop.stopped());
  // Thrown here, not by rethrow(): an exception made in this binary is rethrown by this binary's runtime.
  const std::exception_ptr first = stop.failure();
  ASSERT_TRUE(first);
  try {
    std::rethrow_exception(first);
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "first");
  }
}

TEST(CpuPipelineStop, WaitUntilReturnsTrueOnceDone) {
  PipelineStop stop;
  std::atomic<int> calls{0};
  EXPECT_TRUE(stop.wait_until([&] { return ++calls == 300; }));  // past the spinning, into the yields
  EXPECT_EQ(calls.load(), 300);
  stop.stop();
  EXPECT_TRUE(stop.stopped());
  EXPECT_FALSE(stop.failure());  // stopped without a failure
  EXPECT_NO_THROW(stop.rethrow());
  EXPECT_TRUE(stop.wait_until([] { return true; }));  // done wins over stopped
}

}  // namespace
}  // namespace gpuxfer::test
