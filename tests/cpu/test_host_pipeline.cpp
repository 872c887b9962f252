// The host side of the pageable pipeline, without a GPU: a CopyTeam runs its members on the workers while
// the calling thread goes on (the members wait for it here, so a team that ran on the caller would hang),
// joins them all, and a PipelineStop keeps the first failure and releases every waiter.
#include <atomic>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include <gpuxfer/testing/pattern.hpp>

#include "engine/host_pipeline.hpp"
#include "memory/host_copy_workers.hpp"

namespace gpuxfer::test {
namespace {

using ::gpuxfer::detail::CopyTeam;
using ::gpuxfer::detail::HostCopyWorkers;
using ::gpuxfer::detail::PipelineStop;

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
  { CopyTeam team(workers, 3, [] {}); }
  // 4 MiB over 3 workers and the caller: pieces of 1 MiB. The pattern has no period, so a piece copied to
  // another piece's place shows.
  std::vector<std::byte> src(std::size_t{4} << 20), dst(src.size(), std::byte{0xA5});
  pattern::fill_host(src, 7);
  workers.copy(dst.data(), src.data(), src.size());
  EXPECT_EQ(pattern::count_mismatches_host(dst, 7), 0u);
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
