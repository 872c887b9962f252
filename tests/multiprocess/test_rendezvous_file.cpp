// The shared-file rendezvous between forked processes in a temp folder: every rank gets rank 0's blob for
// 1, 2 and 4 ranks and the folder is left empty; a stale file, a rank claimed twice, a claim or a result of
// another job, world sizes that disagree and a rank that never joins are each an Error(Errc::comm_error)
// saying what to do.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "comm/rendezvous.hpp"
#include "fork_ranks.hpp"
#include "job.hpp"

namespace gpuxfer {
namespace {

using namespace std::chrono_literals;
using test::contains, test::describe, test::rank_body, test::rank_env, test::RankOutcome;

class FileRendezvous : public ::testing::TestWithParam<int> {};

TEST_P(FileRendezvous, EveryRankGetsRankZerosBlobAndNothingIsLeft) {
  const int world = GetParam();
  const test::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const auto init = dir.file("job");
  const std::string blob = test::pattern_blob(static_cast<unsigned>(world) + 10);
  const auto bodies = test::job_bodies(world, init, blob);
  std::vector<std::chrono::milliseconds> delays;
  for (int rank = 0; rank < world; ++rank) {
    delays.push_back(std::chrono::milliseconds(rank == world - 1 ? 200 : 0));  // one late rank
  }
  const auto outcomes = test::run_forked(bodies, 20s, delays);
  ASSERT_EQ(outcomes.size(), static_cast<std::size_t>(world));
  EXPECT_TRUE(test::every_rank_got(outcomes, blob));
  EXPECT_TRUE(dir.empty()) << "files left in " << dir.path();
}

INSTANTIATE_TEST_SUITE_P(Ranks, FileRendezvous, ::testing::Values(1, 2, 4));

TEST(FileRendezvousErrors, AFileLeftByAnEarlierJob) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  std::ofstream(init.path) << "old";
  try {
    (void)detail::exchange_blob(rank_env(1, 2, init, 1000ms), "");
    FAIL() << "a stale rendezvous file was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::comm_error);
    EXPECT_NE(std::string(e.what()).find("exists already"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(init.path), std::string::npos) << e.what();
  }
}

TEST(FileRendezvousErrors, TwoProcessesClaimingOneRank) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  // Both claims come before rank 0 starts: the second is refused at once, the first completes the job.
  const auto outcomes = test::run_forked(
      {rank_body(rank_env(0, 2, init, 3000ms), "blob"), rank_body(rank_env(1, 2, init, 3000ms), ""),
       rank_body(rank_env(1, 2, init, 3000ms), "")},
      20s, {300ms, 0ms, 100ms});
  EXPECT_TRUE(outcomes[0].ok) << describe(outcomes[0]);
  EXPECT_TRUE(outcomes[1].ok) << describe(outcomes[1]);
  ASSERT_EQ(outcomes[2].code, "comm_error") << describe(outcomes[2]);
  EXPECT_TRUE(contains(outcomes[2], "rank 1 is claimed twice")) << outcomes[2].text;
  EXPECT_TRUE(contains(outcomes[2], "GPUXFER_RANK")) << outcomes[2].text;
}

TEST(FileRendezvousErrors, WorldSizesThatDisagreeFailBothSides) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  const auto outcomes = test::run_forked(
      {rank_body(rank_env(0, 2, init, 3000ms), "b"), rank_body(rank_env(1, 3, init, 3000ms), "")});
  EXPECT_TRUE(test::every_rank_failed_with(outcomes, {"world size is 3"}));
}

TEST(FileRendezvousErrors, ARankThatNeverJoinsFailsEveryoneInTime) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  const auto start = std::chrono::steady_clock::now();
  const auto outcomes = test::run_forked(
      {rank_body(rank_env(0, 3, init, 1000ms), "b"), rank_body(rank_env(1, 3, init, 1000ms), "")});
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(test::every_rank_failed_with(outcomes, {"for rank 2 of 3, which never joined"}));
  EXPECT_LT(took, 5s);
}

TEST(FileRendezvousErrors, TwoRanksDrivingOneGpu) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  const auto env = [&](int rank, const char* gpu) { return rank_env(rank, 3, init, 3000ms, gpu); };
  const auto outcomes =
      test::run_forked({rank_body(env(0, "GPU-aaaa"), "b"), rank_body(env(1, "GPU-bbbb"), ""),
                        rank_body(env(2, "GPU-bbbb"), "")});
  EXPECT_TRUE(
      test::every_rank_failed_with(outcomes, {"rank 2 (local rank 2 on ", "and rank 1 (local rank 1 on ",
                                              "both drive GPU-bbbb", "a GPU of its own"}));
}

// Two jobs given one path: job B's rank 1 claims before job A's does. Rank 0 of A must not take B's claim
// (A's rank 0 and B's rank 1 would form one NCCL communicator of two jobs): it refuses, naming both jobs,
// B's rank 1 reads the refusal, and A's own rank 1 finds its number claimed.
TEST(FileRendezvousErrors, AClaimOfAnotherJobIsRefused) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  const auto env = [&](int rank, const char* job) { return rank_env(rank, 2, init, 3000ms, {}, job); };
  const auto outcomes =
      test::run_forked({rank_body(env(0, "slurm:7.0"), "blob"), rank_body(env(1, "slurm:8.0"), ""),
                        rank_body(env(1, "slurm:7.0"), "")},
                       20s, {300ms, 0ms, 100ms});
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_TRUE(test::every_rank_failed_with(
      {outcomes[0], outcomes[1]},
      {"of job 'slurm:8.0'", "rank 0 is of job 'slurm:7.0'", "a GPUXFER_INIT path of its own"}));
  ASSERT_EQ(outcomes[2].code, "comm_error") << describe(outcomes[2]);
  EXPECT_TRUE(contains(outcomes[2], "rank 1 is claimed twice")) << outcomes[2].text;
}

// A rank of another job whose number no rank 0 of that job reads (its world is larger): it finds that the
// result is rank 0's of another job and says so, rather than join it. Rank 0's result is written by hand,
// once the rank waits for it.
TEST(FileRendezvousErrors, AResultOfAnotherJobIsNotJoined) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  const auto write_result = [path = init.path] {
    std::this_thread::sleep_for(200ms);
    std::ofstream(path + ".tmp") << "gpuxfer-rendezvous 1\nworld_size 2\njob torchrun:a\nblob 4\nabcd";
    std::filesystem::rename(path + ".tmp", path);
    return std::string();
  };
  const auto outcomes =
      test::run_forked({rank_body(rank_env(1, 2, init, 3000ms, {}, "torchrun:b"), ""), write_result});
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_TRUE(outcomes[1].ok) << describe(outcomes[1]);
  EXPECT_TRUE(test::every_rank_failed_with(
      {outcomes[0]}, {"rank 1 is of job 'torchrun:b'", "is rank 0's of job 'torchrun:a'"}));
}

// A rank that names no job joins one that does, both ways round, as over TCP.
TEST(FileRendezvous, ARankThatNamesNoJobIsTaken) {
  const test::TempDir dir;
  const std::string blob = test::pattern_blob(43);
  for (const bool root_named : {true, false}) {
    const auto init = dir.file(root_named ? "named" : "unnamed");
    const auto outcomes =
        test::run_forked({rank_body(rank_env(0, 2, init, 3000ms, {}, root_named ? "x" : ""), blob),
                          rank_body(rank_env(1, 2, init, 3000ms, {}, root_named ? "" : "x"), "")});
    EXPECT_TRUE(test::every_rank_got(outcomes, blob)) << "rank 0 names a job: " << root_named;
  }
  EXPECT_TRUE(dir.empty()) << "files left in " << dir.path();
}

// A rank that claimed its number and died before reading the result: rank 0 names it within its timeout
// rather than return as if the job had formed.
TEST(FileRendezvousErrors, ARankThatNeverReadsTheResultIsNamed) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  std::ofstream(init.path + ".rank1") << "world_size 2\nlocal_rank 1\nhost test-host\n";
  const auto start = std::chrono::steady_clock::now();
  const auto outcomes = test::run_forked({rank_body(rank_env(0, 2, init, 1000ms), "b")});
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(outcomes[0].code, "comm_error") << describe(outcomes[0]);
  EXPECT_TRUE(contains(outcomes[0], "rank 1 (on test-host) claimed its number but never read"))
      << outcomes[0].text;
  EXPECT_LT(took, 5s);
}

TEST(FileRendezvousErrors, NoRankZero) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  const auto outcomes = test::run_forked({rank_body(rank_env(1, 2, init, 500ms), "")});
  ASSERT_EQ(outcomes[0].code, "comm_error") << describe(outcomes[0]);
  EXPECT_TRUE(contains(outcomes[0], "for rank 0 to write " + init.path)) << outcomes[0].text;
  EXPECT_TRUE(contains(outcomes[0], "0.5 s (GPUXFER_TIMEOUT)")) << outcomes[0].text;
}

}  // namespace
}  // namespace gpuxfer
