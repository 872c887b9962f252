// The shared-file rendezvous between forked processes in a temp folder: every rank gets rank 0's blob for
// 1, 2 and 4 ranks and the folder is left empty; a stale file, a rank claimed twice, a claim or a result of
// another job, world sizes that disagree and a rank that never joins are each an Error(Errc::comm_error)
// saying what to do, and so is a file put in the rendezvous's place (a FIFO, a huge file, garbage, a
// result forged without the secret, another user's file, a symbolic link), within the timeout.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootstrap/rendezvous.hpp"
#include "bootstrap/secret.hpp"
#include "common/env.hpp"
#include "common/other_user.hpp"
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

INSTANTIATE_TEST_SUITE_P(Ranks, FileRendezvous, ::testing::Values(1, 2, 4), ::testing::PrintToStringParamName());

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

// --- files put in the rendezvous's place by someone else --------------------------------------------------

// Rank @p rank of 2 at @p init alone, and @p plant run 300 ms in: the rank must fail with comm_error
// within its 1.5 s timeout (and a second), not hang or abort.
RankOutcome alone_with(int rank, const detail::InitAddress& init, const std::function<void()>& plant,
                       const std::string& secret = {}) {
  std::function<std::string()> body = rank_body(rank_env(rank, 2, init, 1500ms), "b");
  if (!secret.empty()) {
    body = [init, rank, secret] {
      test::FakeEnv variables({{"GPUXFER_RANK", std::to_string(rank)},
                               {"GPUXFER_WORLD_SIZE", "2"},
                               {"GPUXFER_INIT", "file://" + init.path},
                               {"GPUXFER_TIMEOUT", "1.5"},
                               {"GPUXFER_SECRET", secret}});
      return detail::exchange_blob(detail::read_launch_env(variables.lookup()), "b");
    };
  }
  auto planter = [plant] {
    std::this_thread::sleep_for(300ms);
    plant();
    return std::string("planted");
  };
  const auto start = std::chrono::steady_clock::now();
  const auto outcomes = test::run_forked({body, planter}, 10s);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  return outcomes.at(0);
}

// Writes @p text at @p path as a rank would publish it (a temp file renamed over it).
void plant_file(const std::string& path, const std::string& text) {
  std::ofstream(path + ".planting", std::ios::binary) << text;
  std::filesystem::rename(path + ".planting", path);
}

TEST(FileRendezvousPlanted, AFifoAtTheResultPath) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  const RankOutcome outcome = alone_with(1, init, [&] { mkfifo(init.path.c_str(), 0600); });
  ASSERT_EQ(outcome.code, "comm_error") << describe(outcome);
  EXPECT_TRUE(contains(outcome, "not a regular file")) << outcome.text;
}

TEST(FileRendezvousPlanted, AFifoAtAClaimPath) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  const RankOutcome outcome = alone_with(0, init, [&] { mkfifo((init.path + ".rank1").c_str(), 0600); });
  ASSERT_EQ(outcome.code, "comm_error") << describe(outcome);
  EXPECT_TRUE(contains(outcome, "not a regular file")) << outcome.text;
}

// A 4 GiB sparse claim: refused by its size, not read (rank 0's address space is kept small, so that
// reading it could not pass unnoticed).
TEST(FileRendezvousPlanted, AHugeSparseClaim) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  auto rank_zero = [&] {
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0;
    statm >> pages;
    const rlim_t room = pages * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{1} << 30);
    const rlimit limit{room, room};
    setrlimit(RLIMIT_AS, &limit);
    return detail::exchange_blob(rank_env(0, 2, init, 1500ms), "b");
  };
  auto planter = [&] {
    std::this_thread::sleep_for(300ms);
    const std::string path = init.path + ".rank1";
    const int fd = open((path + ".planting").c_str(), O_WRONLY | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, off_t{4} << 30) != 0) return std::string("could not plant");
    close(fd);
    std::filesystem::rename(path + ".planting", path);
    return std::string("planted");
  };
  const auto outcomes = test::run_forked({rank_zero, planter}, 10s);
  ASSERT_EQ(outcomes[0].code, "comm_error") << describe(outcomes[0]);
  EXPECT_TRUE(contains(outcomes[0], "bytes")) << outcomes[0].text;
}

TEST(FileRendezvousPlanted, AResultWithAGarbageBlobSize) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  const RankOutcome outcome = alone_with(
      1, init, [&] { plant_file(init.path, "gpuxfer-rendezvous 1\nworld_size 2\njob \nblob abc\n"); });
  ASSERT_EQ(outcome.code, "comm_error") << describe(outcome);
}

// With a secret, a result that was not written with it is not taken.
TEST(FileRendezvousPlanted, AForgedResultIsNotTakenWithASecret) {
  if (!detail::authentication_available())
    GTEST_SKIP() << "built without OpenSSL's libcrypto: no secret to prove";
  const test::TempDir dir;
  const auto init = dir.file("job");
  const RankOutcome outcome = alone_with(
      1, init, [&] { plant_file(init.path, "gpuxfer-rendezvous 1\nworld_size 2\njob \nblob 4\nfake"); },
      std::string(64, 'c'));
  ASSERT_EQ(outcome.code, "comm_error") << describe(outcome);
  EXPECT_TRUE(contains(outcome, "secret")) << outcome.text;
}

// A rank's claim is readable by its owner alone (the result too: rank 0 writes it the same way).
TEST(FileRendezvousPlanted, AClaimIsTheOwnersAlone) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  auto mode_of_claim = [&] {
    std::this_thread::sleep_for(300ms);
    struct stat info {};
    if (stat((init.path + ".rank1").c_str(), &info) != 0) return std::string("no claim");
    return std::to_string(info.st_mode & 0777);
  };
  const auto outcomes = test::run_forked({rank_body(rank_env(1, 2, init, 1000ms), ""), mode_of_claim});
  ASSERT_TRUE(outcomes[1].ok) << describe(outcomes[1]);
  EXPECT_EQ(outcomes[1].text, std::to_string(0600)) << "the claim's mode, in decimal";
}

// --- another user of the host, in a folder open to all (a shared /tmp, mode 1777) ------------------------

// Opens @p dir to every user as a shared /tmp is; returns why another user cannot act there, or empty.
std::string share_with_other_user(const test::TempDir& dir) {
  if (dir.path().empty() || chmod(dir.path().c_str(), 01777) != 0) return "no temp folder to share";
  return test::other_user_unavailable(dir.path());
}

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

uid_t owner_of(const std::string& path) {
  struct stat info {};
  return lstat(path.c_str(), &info) == 0 ? info.st_uid : static_cast<uid_t>(-1);
}

// Has the other user write @p text (printf's escapes) at @p path, through a temp file it renames.
::testing::AssertionResult other_user_writes(const std::string& path, const std::string& text) {
  const int status = test::other_user_run("printf '" + text + "' > '" + path + ".planting' && mv '" + path +
                                          ".planting' '" + path + "'");
  if (status == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "uid 65534 could not write " << path << " (status " << status << ")";
}

// Has the other user make @p victim, a file of its own, and links to it at each of @p links.
::testing::AssertionResult other_user_links(const std::string& victim,
                                            const std::vector<std::string>& links) {
  std::string command = "printf 'the other user s file\\n' > '" + victim + "'";
  for (const std::string& link : links) command += " && ln -s '" + victim + "' '" + link + "'";
  const int status = test::other_user_run(command);
  if (status == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "uid 65534 could not plant its links (status " << status << ")";
}

constexpr const char* victims_text = "the other user s file\n";

// Another user writes a claim and a done file for rank 1: rank 0 does not admit them, but refuses the job
// naming that user's file (comm_error), and leaves the files as they were.
TEST(FileRendezvousOtherUser, AClaimOfAnotherUserIsRefused) {
  const test::TempDir dir;
  if (const std::string why = share_with_other_user(dir); !why.empty()) GTEST_SKIP() << why;
  const auto init = dir.file("job");
  ASSERT_TRUE(
      other_user_writes(init.path + ".rank1", "world_size 2\\nlocal_rank 1\\nhost h\\ngpu \\njob \\n"));
  ASSERT_TRUE(other_user_writes(init.path + ".done1", "done\\n"));
  const auto start = std::chrono::steady_clock::now();
  const RankOutcome rank_zero = test::run_forked({rank_body(rank_env(0, 2, init, 1500ms), "b")}, 10s).at(0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  ASSERT_EQ(rank_zero.code, "comm_error") << describe(rank_zero);
  EXPECT_TRUE(contains(rank_zero, init.path + ".rank1 belongs to another user (uid 65534)"))
      << rank_zero.text;
  EXPECT_EQ(contents(init.path + ".rank1"), "world_size 2\nlocal_rank 1\nhost h\ngpu \njob \n");
  EXPECT_EQ(owner_of(init.path + ".rank1"), test::other_uid);
  EXPECT_EQ(owner_of(init.path + ".done1"), test::other_uid);
}

// Another user publishes a result while rank 1 waits: rank 1 does not take its blob (comm_error).
TEST(FileRendezvousOtherUser, AResultOfAnotherUserIsRefused) {
  const test::TempDir dir;
  if (const std::string why = share_with_other_user(dir); !why.empty()) GTEST_SKIP() << why;
  const auto init = dir.file("job");
  const RankOutcome outcome = alone_with(1, init, [&] {
    (void)other_user_writes(init.path, "gpuxfer-rendezvous 1\\nworld_size 2\\njob \\nblob 4\\nfake");
  });
  ASSERT_EQ(outcome.code, "comm_error") << describe(outcome);
  EXPECT_TRUE(contains(outcome, init.path + " belongs to another user (uid 65534)")) << outcome.text;
}

// Another user's file appears at the result's path while rank 0 waits: rank 0 publishes only where nothing
// is (an exclusive link), so it leaves that file as it was and says the ranks cannot be told.
TEST(FileRendezvousOtherUser, RankZeroReplacesNoFileOfAnotherUser) {
  const test::TempDir dir;
  if (const std::string why = share_with_other_user(dir); !why.empty()) GTEST_SKIP() << why;
  const auto init = dir.file("job");
  const RankOutcome outcome = alone_with(0, init, [&] { (void)other_user_writes(init.path, "not yours\n"); });
  ASSERT_EQ(outcome.code, "comm_error") << describe(outcome);
  EXPECT_TRUE(contains(outcome, "was made by another process: the ranks cannot be told")) << outcome.text;
  EXPECT_EQ(contents(init.path), "not yours\n");
  EXPECT_EQ(owner_of(init.path), test::other_uid);
}

// Another user's symbolic links at the names the ranks read and create (a claim, a done file, the result),
// to a file of its own: no rank follows one (comm_error, within the timeout), and that file is not
// written to.
TEST(FileRendezvousSymlinks, LinksAtTheRendezvousNamesAreNotFollowed) {
  const test::TempDir dir;
  if (const std::string why = share_with_other_user(dir); !why.empty()) GTEST_SKIP() << why;
  const auto init = dir.file("job");
  const std::string victim = dir.path() + "/victim";
  ASSERT_TRUE(other_user_links(victim, {init.path + ".rank1", init.path + ".done1"}));
  // Rank 0 reads rank 1's claim: a link.
  const RankOutcome rank_zero = test::run_forked({rank_body(rank_env(0, 2, init, 1500ms), "b")}, 10s).at(0);
  ASSERT_EQ(rank_zero.code, "comm_error") << describe(rank_zero);
  EXPECT_TRUE(contains(rank_zero, "symbolic link")) << rank_zero.text;
  // Rank 1 creates its claim where the link is.
  const test::TempDir second;
  if (const std::string why = share_with_other_user(second); !why.empty()) GTEST_SKIP() << why;
  const auto at_claim = second.file("job");
  const std::string second_victim = second.path() + "/victim";
  ASSERT_TRUE(other_user_links(second_victim, {at_claim.path + ".rank1"}));
  const RankOutcome rank_one = test::run_forked({rank_body(rank_env(1, 2, at_claim, 1500ms), "")}, 10s).at(0);
  ASSERT_EQ(rank_one.code, "comm_error") << describe(rank_one);
  // Rank 1 waits for the result: a link appears there.
  const test::TempDir third;
  if (const std::string why = share_with_other_user(third); !why.empty()) GTEST_SKIP() << why;
  const auto at_result = third.file("job");
  const std::string third_victim = third.path() + "/victim";
  const RankOutcome waiting =
      alone_with(1, at_result, [&] { (void)other_user_links(third_victim, {at_result.path}); });
  ASSERT_EQ(waiting.code, "comm_error") << describe(waiting);
  EXPECT_TRUE(contains(waiting, "symbolic link")) << waiting.text;
  for (const std::string& path : {victim, second_victim, third_victim}) {
    EXPECT_EQ(contents(path), victims_text) << path << " was written to";
    EXPECT_EQ(owner_of(path), test::other_uid) << path;
  }
}

// Links at the temp names a rank could once be predicted to write (<name>.tmp<pid>), planted by another user
// before the rank writes: the temp names are random and created anew, so the job forms and no link is
// followed.
TEST(FileRendezvousSymlinks, LinksAtPredictableTempNamesAreNotFollowed) {
  const test::TempDir dir;
  if (const std::string why = share_with_other_user(dir); !why.empty()) GTEST_SKIP() << why;
  const auto init = dir.file("job");
  const std::string victim = dir.path() + "/victim";
  ASSERT_TRUE(other_user_links(victim, {}));
  std::vector<std::function<std::string()>> bodies;
  for (int rank = 0; rank < 2; ++rank) {
    bodies.push_back([init, rank, victim] {
      const std::string pid = std::to_string(getpid());
      std::string command = "true";
      for (const std::string& name :
           std::vector<std::string>{init.path, init.path + ".rank" + std::to_string(rank),
                                    init.path + ".done" + std::to_string(rank)}) {
        command += " && ln -s '" + victim + "' '" + name + ".tmp" + pid + "'";
      }
      if (test::other_user_run(command) != 0) return std::string("could not plant the links");
      return detail::exchange_blob(rank_env(rank, 2, init, 5000ms), rank == 0 ? "the blob" : "");
    });
  }
  const auto outcomes = test::run_forked(bodies, 20s);
  EXPECT_TRUE(test::every_rank_got(outcomes, "the blob"));
  EXPECT_EQ(contents(victim), victims_text) << "the other user's file was written to";
  EXPECT_EQ(owner_of(victim), test::other_uid);
}

// Messages never advise removing a folder: with GPUXFER_INIT=file:///tmp-like paths "remove <path>*"
// would name every file beside it.
TEST(FileRendezvousErrors, AStaleFileMessageNamesFilesNotAGlob) {
  const test::TempDir dir;
  const auto init = dir.file("job");
  std::ofstream(init.path + ".rank1") << "old";
  const RankOutcome outcome = test::run_forked({rank_body(rank_env(1, 2, init, 1000ms), "")}).at(0);
  ASSERT_EQ(outcome.code, "comm_error") << describe(outcome);
  EXPECT_FALSE(contains(outcome, init.path + "*")) << outcome.text;
}

// With a secret on every rank, the files carry its MAC and the job forms as without one.
TEST(FileRendezvous, RanksWithASecretMeet) {
  if (!detail::authentication_available())
    GTEST_SKIP() << "built without OpenSSL's libcrypto: no secret to prove";
  const test::TempDir dir;
  const auto init = dir.file("job");
  const std::string blob = test::pattern_blob(46);
  std::vector<std::function<std::string()>> bodies;
  for (int rank = 0; rank < 3; ++rank) {
    bodies.push_back([init, rank, blob] {
      test::FakeEnv variables({{"GPUXFER_RANK", std::to_string(rank)},
                               {"GPUXFER_WORLD_SIZE", "3"},
                               {"GPUXFER_INIT", "file://" + init.path},
                               {"GPUXFER_TIMEOUT", "10"},
                               {"GPUXFER_SECRET", std::string(64, 'd')}});
      return detail::exchange_blob(detail::read_launch_env(variables.lookup()), rank == 0 ? blob : "");
    });
  }
  EXPECT_TRUE(test::every_rank_got(test::run_forked(bodies, 20s), blob));
  EXPECT_TRUE(dir.empty()) << "files left in " << dir.path();
}

}  // namespace
}  // namespace gpuxfer
