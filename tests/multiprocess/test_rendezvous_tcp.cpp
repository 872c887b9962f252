// The TCP rendezvous between forked processes on 127.0.0.1: every rank gets rank 0's blob byte for byte
// for 1, 2 and 4 ranks, and each failure of the list is an Error(Errc::comm_error) that names what
// to check, on rank 0 and on the other ranks, within a short timeout.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/rendezvous.hpp"
#include "bootstrap/secret.hpp"
#include "bootstrap/tcp_rendezvous.hpp"
#include "common/env.hpp"
#include "fork_ranks.hpp"
#include "job.hpp"

namespace gpuxfer {
namespace {

using namespace std::chrono_literals;
using test::contains, test::describe, test::rank_body, test::rank_env, test::RankOutcome;

class TcpRendezvous : public ::testing::TestWithParam<int> {};

TEST_P(TcpRendezvous, EveryRankGetsRankZerosBlob) {
  const int world = GetParam();
  const auto init = test::local_tcp();
  const std::string blob = test::pattern_blob(static_cast<unsigned>(world));
  const auto bodies = test::job_bodies(world, init, blob);
  std::vector<std::chrono::milliseconds> delays;
  for (int rank = 0; rank < world; ++rank) {
    delays.push_back(rank == 0 ? 300ms : 0ms);  // the others start first and must retry until rank 0 listens
  }
  const auto outcomes = test::run_forked(bodies, 20s, delays);
  ASSERT_EQ(outcomes.size(), static_cast<std::size_t>(world));
  EXPECT_TRUE(test::every_rank_got(outcomes, blob));
}

INSTANTIATE_TEST_SUITE_P(Ranks, TcpRendezvous, ::testing::Values(1, 2, 4), ::testing::PrintToStringParamName());

// A listener for the wildcard address takes a connection to any address of the host (127.0.0.2 too); one
// for 127.0.0.1 does not.
TEST(TcpListen, OnlyTheWildcardTakesConnectionsToAnotherAddressOfTheHost) {
  const detail::UniqueFd any = detail::tcp_listen("0.0.0.0", 0, 1);
  const detail::Deadline deadline(3000ms);
  EXPECT_TRUE(detail::tcp_connect("127.0.0.2", detail::bound_port(any), deadline, "a test"));
  const detail::UniqueFd one = detail::tcp_listen("127.0.0.1", 0, 1);
  EXPECT_THROW(
      (void)detail::tcp_connect("127.0.0.2", detail::bound_port(one), detail::Deadline(300ms), "a test"),
      Error);
}

// Whether this host can listen on ::1 (IPv6 may be off in a container).
bool has_ipv6_loopback() {
  try {
    (void)detail::tcp_listen("::1", 0, 1);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// What a connection to 127.0.0.1:@p port gives: "taken" or "refused".
std::string try_loopback(int port) {
  try {
    (void)detail::tcp_connect("127.0.0.1", port, detail::Deadline(300ms), "a test");
    return "taken";
  } catch (const Error&) {
    return "refused";
  }
}

// Rank 0 and rank 1 of a job at MASTER_ADDR=@p host (and @p listen as GPUXFER_LISTEN_ADDR, where given):
// rank 1 first tries 127.0.0.1 at rank 0's port, then joins; it returns what the try gave and its blob.
std::vector<RankOutcome> job_at_master(const std::string& host, const std::string& listen) {
  const int port = detail::pick_free_port("127.0.0.1");
  std::vector<std::function<std::string()>> bodies;
  for (int rank = 0; rank < 2; ++rank) {
    bodies.push_back([=] {
      std::map<std::string, std::string> values{{"RANK", std::to_string(rank)},
                                                {"WORLD_SIZE", "2"},
                                                {"MASTER_ADDR", host},
                                                {"MASTER_PORT", std::to_string(port - 1)},
                                                {"GPUXFER_TIMEOUT", "10"}};
      if (!listen.empty()) values.emplace("GPUXFER_LISTEN_ADDR", listen);
      test::FakeEnv variables(values);
      const detail::LaunchEnv env = detail::read_launch_env(variables.lookup());
      if (rank == 0) return detail::exchange_blob(env, "the blob");
      std::this_thread::sleep_for(300ms);
      const std::string tried = try_loopback(port);
      return tried + ", " + detail::exchange_blob(env, "");
    });
  }
  return test::run_forked(bodies, 20s);
}

// Rank 0 listens on the address it was given alone, not on every interface: given 127.0.0.2 (or ::1) in
// MASTER_ADDR, a connection to 127.0.0.1 at its port is refused, and the job forms at the given address.
TEST(TcpRendezvousListen, RankZeroListensOnlyOnMasterAddr) {
  for (const std::string host : {"127.0.0.2", "::1"}) {
    if (host == "::1" && !has_ipv6_loopback()) {
      std::cout << "no IPv6 loopback here: ::1 not tried\n";
      continue;
    }
    const auto outcomes = job_at_master(host, "");
    ASSERT_TRUE(outcomes.at(0).ok) << host << ": " << describe(outcomes[0]);
    ASSERT_TRUE(outcomes.at(1).ok) << host << ": " << describe(outcomes[1]);
    EXPECT_EQ(outcomes[1].text, "refused, the blob") << host;
  }
}

// GPUXFER_LISTEN_ADDR=0.0.0.0 asks for every interface: 127.0.0.1 reaches the rank 0 of
// MASTER_ADDR=127.0.0.2.
TEST(TcpRendezvousListen, AWildcardListenAddrTakesEveryInterface) {
  const auto outcomes = job_at_master("127.0.0.2", "0.0.0.0");
  ASSERT_TRUE(outcomes.at(0).ok) << describe(outcomes[0]);
  ASSERT_TRUE(outcomes.at(1).ok) << describe(outcomes[1]);
  EXPECT_EQ(outcomes[1].text, "taken, the blob");
}

// Ranks 0 and 1 of a job at @p init, rank 0 with GPUXFER_LISTEN_FD=@p listen_fd, as gpuxfer launch starts
// them.
std::vector<std::function<std::string()>> job_with_listen_fd(const detail::InitAddress& init,
                                                             const std::string& listen_fd) {
  std::vector<std::function<std::string()>> bodies;
  for (int rank = 0; rank < 2; ++rank) {
    bodies.push_back([=] {
      std::map<std::string, std::string> values{{"GPUXFER_RANK", std::to_string(rank)},
                                                {"GPUXFER_WORLD_SIZE", "2"},
                                                {"GPUXFER_INIT", init.to_string()},
                                                {"GPUXFER_TIMEOUT", "2"}};
      if (rank == 0) values.emplace("GPUXFER_LISTEN_FD", listen_fd);
      test::FakeEnv variables(values);
      return detail::exchange_blob(detail::read_launch_env(variables.lookup()), rank == 0 ? "inherited" : "");
    });
  }
  return bodies;
}

// Rank 0 serves on the listening socket it was handed (GPUXFER_LISTEN_FD, as gpuxfer launch does): it
// listens on no port of its own (this process holds the port too: a new listener there would fail).
TEST(TcpRendezvousListen, RankZeroServesOnTheSocketItInherits) {
  const detail::UniqueFd listener = detail::tcp_listen("127.0.0.1", 0, 1);
  const auto init =
      detail::parse_init_address("tcp://127.0.0.1:" + std::to_string(detail::bound_port(listener)), "test");
  const auto outcomes = test::run_forked(job_with_listen_fd(init, std::to_string(listener.get())), 20s);
  EXPECT_TRUE(test::every_rank_got(outcomes, "inherited"));
}

// A GPUXFER_LISTEN_FD that is not a socket listening at the rendezvous's port (another port's, a pipe's,
// one not open) is refused by rank 0, naming it; one that is no number, when it is read.
TEST(TcpRendezvousListen, AListenFdThatIsNotTheRendezvousListenerIsRefused) {
  const detail::UniqueFd other = detail::tcp_listen("127.0.0.1", 0, 1);
  int ends[2];
  ASSERT_EQ(pipe(ends), 0);
  const detail::UniqueFd read_end(ends[0]);
  const detail::UniqueFd write_end(ends[1]);
  const auto init = test::local_tcp();
  for (const std::string& fd :
       std::vector<std::string>{std::to_string(other.get()), std::to_string(read_end.get()), "999"}) {
    const RankOutcome rank_zero = test::run_forked({job_with_listen_fd(init, fd).at(0)}, 10s).at(0);
    EXPECT_EQ(rank_zero.code, "comm_error") << fd << ": " << describe(rank_zero);
    EXPECT_TRUE(contains(rank_zero, "GPUXFER_LISTEN_FD=" + fd)) << rank_zero.text;
  }
  const RankOutcome not_a_number = test::run_forked({job_with_listen_fd(init, "three").at(0)}, 10s).at(0);
  EXPECT_EQ(not_a_number.code, "invalid_option") << describe(not_a_number);
  EXPECT_TRUE(contains(not_a_number, "GPUXFER_LISTEN_FD='three'")) << not_a_number.text;
}

// Under torchrun its agent already serves a store at MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE), held here
// by a listener of this process: ranks that read torchrun's variables must meet beside it, not fail on a
// port in use.
TEST(TcpRendezvousUnderTorchrun, RanksMeetBesideTheStoreAtMasterPort) {
  // A free port for the store whose next port is free too (rank 0 takes it), a few tries at most.
  detail::UniqueFd store;
  int port = 0;
  for (int attempt = 0; attempt < 20 && port == 0; ++attempt) {
    detail::UniqueFd held = detail::tcp_listen("127.0.0.1", 0, 1);
    const int candidate = detail::bound_port(held);
    if (candidate == 65535) continue;
    try {
      (void)detail::tcp_listen("0.0.0.0", candidate + 1, 1);  // closed again at once
    } catch (const Error&) {
      continue;
    }
    store = std::move(held);
    port = candidate;
  }
  if (port == 0) GTEST_SKIP() << "found no free port whose next port was free too";
  std::vector<std::function<std::string()>> bodies;
  for (int rank = 0; rank < 2; ++rank) {
    bodies.push_back([rank, port] {
      test::FakeEnv variables({{"RANK", std::to_string(rank)},
                               {"WORLD_SIZE", "2"},
                               {"LOCAL_RANK", std::to_string(rank)},
                               {"MASTER_ADDR", "127.0.0.1"},
                               {"MASTER_PORT", std::to_string(port)},
                               {"TORCHELASTIC_USE_AGENT_STORE", "True"},  // as torchrun sets it (unread)
                               {"GPUXFER_TIMEOUT", "10"}});
      const detail::LaunchEnv env = detail::read_launch_env(variables.lookup());
      return detail::exchange_blob(env, env.rank == 0 ? "torchrun's job" : "ignored");
    });
  }
  const auto outcomes = test::run_forked(bodies, 20s);
  EXPECT_TRUE(test::every_rank_got(outcomes, "torchrun's job"));
}

TEST(TcpRendezvousErrors, NobodyListeningNamesTheAddressAndTheTimeout) {
  const auto init = test::local_tcp();
  const auto start = std::chrono::steady_clock::now();
  const auto outcomes = test::run_forked({rank_body(rank_env(1, 2, init, 1000ms), "")});
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(outcomes[0].code, "comm_error") << describe(outcomes[0]);
  EXPECT_TRUE(contains(outcomes[0], "127.0.0.1:" + std::to_string(init.port))) << outcomes[0].text;
  EXPECT_TRUE(contains(outcomes[0], "1 s (GPUXFER_TIMEOUT)")) << outcomes[0].text;
  EXPECT_TRUE(contains(outcomes[0], "GPUXFER_INIT")) << outcomes[0].text;
  EXPECT_LT(took, 5s);
}

// A name that does not resolve (yet: a cluster's DNS may learn rank 0's name after the other ranks start)
// is tried again until the timeout, and then named with the resolver's error. ".invalid" never resolves
// (RFC 6761).
TEST(TcpRendezvousErrors, ANameThatDoesNotResolveIsTriedUntilTheTimeout) {
  const auto init = detail::parse_init_address("tcp://gpuxfer-rank-zero.invalid:29500", "test");
  const auto start = std::chrono::steady_clock::now();
  const auto outcomes = test::run_forked({rank_body(rank_env(1, 2, init, 1500ms), "")}, 60s);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(outcomes[0].code, "comm_error") << describe(outcomes[0]);
  EXPECT_TRUE(contains(outcomes[0], "cannot resolve the rendezvous host 'gpuxfer-rank-zero.invalid'"))
      << outcomes[0].text;
  EXPECT_TRUE(contains(outcomes[0], "within 1.5 s (GPUXFER_TIMEOUT)")) << outcomes[0].text;
  EXPECT_TRUE(contains(outcomes[0], "MASTER_ADDR")) << outcomes[0].text;
  EXPECT_GE(took, 1400ms) << "gave up before the timeout";
}

// The last try of a rank comes when the deadline has (almost) passed: its look-up is given no time, and the
// error must still be the one of every try before it (nobody listens), not "the resolver gave no answer".
// A numeric address needs no resolver at all. On the runner this came as a rank started twice.
TEST(TcpRendezvousErrors, TheLastTryAtTheDeadlineStillSaysNobodyListens) {
  const int port = detail::pick_free_port("127.0.0.1");
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    for (const auto timeout : {0ms, 1ms, 120ms}) {
      try {
        (void)detail::tcp_connect(host, port, detail::Deadline(timeout), "rank 1");
        FAIL() << "connected to a port nobody listens on";
      } catch (const Error& e) {
        const std::string what = e.what();
        if (host == "localhost" && timeout < 120ms) {
          continue;  // a name given (next to) no time for its first look-up: either error is right
        }
        EXPECT_NE(what.find("rank 1 could not reach rank 0 at " + host), std::string::npos)
            << host << ", " << timeout.count() << " ms: " << what;
      }
    }
  }
}

TEST(TcpRendezvousErrors, PortInUseOnRankZero) {
  const detail::UniqueFd holder = detail::tcp_listen("127.0.0.1", 0, 1);
  const int port = detail::bound_port(holder);
  const auto init = detail::parse_init_address("tcp://127.0.0.1:" + std::to_string(port), "test");
  try {
    (void)detail::exchange_blob(rank_env(0, 2, init, 1000ms), "blob");
    FAIL() << "rank 0 listened on a port in use";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::comm_error);
    const std::string what = e.what();
    EXPECT_NE(what.find("already in use"), std::string::npos) << what;
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << what;
    EXPECT_NE(what.find("MASTER_PORT"), std::string::npos) << what;
  }
}

TEST(TcpRendezvousErrors, WorldSizesThatDisagreeFailBothSides) {
  const auto init = test::local_tcp();
  const auto outcomes = test::run_forked(
      {rank_body(rank_env(0, 2, init, 3000ms), "b"), rank_body(rank_env(1, 3, init, 3000ms), "")});
  EXPECT_TRUE(test::every_rank_failed_with(outcomes, {"world size is 3", "GPUXFER_WORLD_SIZE"}));
}

TEST(TcpRendezvousErrors, TwoProcessesClaimingOneRank) {
  const auto init = test::local_tcp();
  const auto outcomes = test::run_forked({rank_body(rank_env(0, 3, init, 3000ms), "b"),
                                          rank_body(rank_env(1, 3, init, 3000ms), ""),
                                          rank_body(rank_env(1, 3, init, 3000ms), "")});
  EXPECT_TRUE(test::every_rank_failed_with(outcomes, {"rank 1 is claimed twice"}));
}

// Two ranks that would drive one GPU (the same GPU id, as create() takes it from CUDA): refused before
// NCCL sees them, on every rank, naming both; rank 0's own GPU counts too.
TEST(TcpRendezvousErrors, TwoRanksDrivingOneGpu) {
  const auto init = test::local_tcp();
  const auto env = [&](int rank, const char* gpu) { return rank_env(rank, 3, init, 3000ms, gpu); };
  const auto outcomes =
      test::run_forked({rank_body(env(0, "GPU-aaaa"), "b"), rank_body(env(1, "GPU-bbbb"), ""),
                        rank_body(env(2, "GPU-bbbb"), "")},
                       20s, {0ms, 0ms, 200ms});
  EXPECT_TRUE(
      test::every_rank_failed_with(outcomes, {"rank 2 (local rank 2 on ", "and rank 1 (local rank 1 on ",
                                              "both drive GPU-bbbb", "a GPU of its own"}));
  const auto with_root =
      test::run_forked({rank_body(env(0, "GPU-aaaa"), "b"), rank_body(env(1, "GPU-aaaa"), ""),
                        rank_body(env(2, "GPU-cccc"), "")},
                       20s, {0ms, 300ms, 100ms});
  EXPECT_TRUE(
      test::every_rank_failed_with(with_root, {"and rank 0 (local rank 0 on ", "both drive GPU-aaaa"}));
}

// A rank that sent its Hello and died before the world formed (rank 3 has not come yet): rank 0 and the
// ranks that joined fail at once, naming it, rather than wait for rank 3 and hand out the blob to a world
// whose NCCL initialisation would then time out without a name.
TEST(TcpRendezvousErrors, ARankThatLeavesAfterJoiningIsNamed) {
  const auto init = test::local_tcp();
  auto joins_and_leaves = [&] {
    const detail::Deadline deadline(3000ms);
    const detail::UniqueFd socket = detail::tcp_connect(init.host, init.port, deadline, "rank 1");
    detail::Hello hello;
    hello.world_size = 4;
    hello.rank = 1;
    hello.local_rank = 1;
    hello.host = "test-host";
    const std::string message = detail::encode(hello);
    (void)detail::send_all(socket, std::as_bytes(std::span<const char>(message.data(), message.size())),
                           deadline);
    std::this_thread::sleep_for(100ms);
    return std::string("left");  // the connection closes here
  };
  const auto start = std::chrono::steady_clock::now();
  const auto outcomes = test::run_forked({rank_body(rank_env(0, 4, init, 3000ms), "b"),
                                          rank_body(rank_env(2, 4, init, 3000ms), ""), joins_and_leaves},
                                         20s, {0ms, 100ms, 300ms});
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_TRUE(outcomes[2].ok) << describe(outcomes[2]);
  EXPECT_TRUE(
      test::every_rank_failed_with({outcomes[0], outcomes[1]}, {"rank 1 (local rank 1 on test-host) left"}));
  EXPECT_LT(took, 2500ms) << "rank 0 should see the connection close, not wait for its timeout";
}

// A process of another job on the job's port (two jobs given one MASTER_PORT, or a rank of an earlier job
// still trying to reach its rank 0): rank 0 refuses it alone, naming both jobs, and the job forms with
// its own rank 1, which comes later. Without job names that stranger's rank 1 would have been taken, and
// the real one refused as a rank claimed twice, failing the whole job. Its other world size does not
// matter either: the job is compared first.
TEST(TcpRendezvousErrors, AProcessOfAnotherJobIsRefusedAloneAndTheJobForms) {
  const auto init = test::local_tcp();
  const auto env = [&](int rank, int world, const char* job) {
    return rank_env(rank, world, init, 5000ms, {}, job);
  };
  const std::string blob = test::pattern_blob(41);
  const auto outcomes =
      test::run_forked({rank_body(env(0, 2, "slurm:7.0"), blob), rank_body(env(1, 3, "slurm:8.0"), ""),
                        rank_body(env(1, 2, "slurm:7.0"), "")},
                       20s, {0ms, 50ms, 400ms});
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_TRUE(test::every_rank_got({outcomes[0], outcomes[2]}, blob));
  EXPECT_TRUE(test::every_rank_failed_with(
      {outcomes[1]}, {"of job 'slurm:8.0'", "serves job 'slurm:7.0'", "a rendezvous address of its own"}));
}

// A rank that names no job (set by hand) joins a job that has a name, and the other way round: only two
// names that differ are refused.
TEST(TcpRendezvous, ARankThatNamesNoJobIsTaken) {
  const auto init = test::local_tcp();
  const auto env = [&](int rank, const char* job) { return rank_env(rank, 3, init, 5000ms, {}, job); };
  const std::string blob = test::pattern_blob(42);
  const auto outcomes = test::run_forked({rank_body(env(0, "torchrun:a"), blob), rank_body(env(1, ""), ""),
                                          rank_body(env(2, "torchrun:a"), "")});
  EXPECT_TRUE(test::every_rank_got(outcomes, blob));
  const auto unnamed_root = test::local_tcp();
  const auto outcomes_2 = test::run_forked({rank_body(rank_env(0, 2, unnamed_root, 5000ms), blob),
                                            rank_body(rank_env(1, 2, unnamed_root, 5000ms, {}, "x"), "")});
  EXPECT_TRUE(test::every_rank_got(outcomes_2, blob));
}

// Ranks that never join are listed as ranges, so that a large world's error stays short.
TEST(TcpRendezvousErrors, MissingRanksAreListedAsRanges) {
  const auto init = test::local_tcp();
  const auto outcomes = test::run_forked(
      {rank_body(rank_env(0, 100000, init, 1000ms), "b"), rank_body(rank_env(5, 100000, init, 1000ms), "")});
  EXPECT_TRUE(test::every_rank_failed_with(
      outcomes, {"for ranks 1 to 4 and 6 to 99999 of 100000, which never joined"}));
  for (const RankOutcome& outcome : outcomes) EXPECT_LT(outcome.text.size(), 1000u) << outcome.text.size();
}

// A second process claiming rank 1 after the world of two has formed: rank 0 has stopped listening, so
// it cannot be told "claimed twice"; its error must still name that cause, not only rank 0's absence.
TEST(TcpRendezvousErrors, ARankStartedTwiceAfterTheWorldFormedIsToldSo) {
  const auto init = test::local_tcp();
  const auto outcomes = test::run_forked(
      {rank_body(rank_env(0, 2, init, 1500ms), "b"), rank_body(rank_env(1, 2, init, 1500ms), ""),
       rank_body(rank_env(1, 2, init, 1500ms), "")},
      20s, {0ms, 0ms, 600ms});
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_TRUE(outcomes[0].ok) << describe(outcomes[0]);
  EXPECT_TRUE(outcomes[1].ok) << describe(outcomes[1]);
  ASSERT_EQ(outcomes[2].code, "comm_error") << describe(outcomes[2]);
  EXPECT_TRUE(contains(outcomes[2], "started twice")) << outcomes[2].text;
}

// Rank 0 of a world of 2 against a hand-made Hello: both sides fail with @p text.
void expect_hello_refused(const detail::Hello& hello, const std::string& text) {
  const auto init = test::local_tcp();
  const auto outcomes = test::run_forked({rank_body(rank_env(0, 2, init, 3000ms), "b"),
                                          [&] { return detail::join_tcp_rendezvous(init, hello, 3000ms); }});
  EXPECT_TRUE(test::every_rank_failed_with(outcomes, {text}));
}

TEST(TcpRendezvousErrors, RankOutOfRange) {
  detail::Hello hello;
  hello.world_size = 2;
  hello.rank = 5;
  hello.host = "test-host";
  expect_hello_refused(hello, "rank 5 (local rank 0 on test-host) is out of range");
}

TEST(TcpRendezvousErrors, AnotherProtocolVersion) {
  detail::Hello hello;
  hello.version = 99;
  hello.world_size = 2;
  hello.rank = 1;
  expect_hello_refused(hello, "protocol 99");
}

TEST(TcpRendezvousErrors, ARankThatNeverJoinsFailsEveryoneInTime) {
  const auto init = test::local_tcp();
  const auto start = std::chrono::steady_clock::now();
  const auto outcomes = test::run_forked({rank_body(rank_env(0, 4, init, 1500ms), "b"),
                                          rank_body(rank_env(1, 4, init, 1500ms), ""),
                                          rank_body(rank_env(3, 4, init, 1500ms), "")});
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(test::every_rank_failed_with(outcomes, {"for rank 2 of 4, which never joined"}));
  EXPECT_LT(took, 6s);
}

TEST(TcpRendezvousErrors, AStrangerOnThePortDoesNotBreakTheJob) {
  const auto init = test::local_tcp();
  const std::string blob = test::pattern_blob(3);
  auto stranger = [&] {
    std::this_thread::sleep_for(100ms);
    const detail::Deadline deadline(3000ms);
    const detail::UniqueFd socket = detail::tcp_connect(init.host, init.port, deadline, "stranger");
    const std::string junk = "GET / HTTP/1.0\r\n\r\n";
    (void)detail::send_all(socket, std::as_bytes(std::span<const char>(junk.data(), junk.size())), deadline);
    return std::string("sent");
  };
  const auto outcomes = test::run_forked(
      {rank_body(rank_env(0, 2, init, 3000ms), blob), stranger, rank_body(rank_env(1, 2, init, 3000ms), "")},
      20s, {0ms, 0ms, 400ms});
  for (const RankOutcome& outcome : outcomes) ASSERT_TRUE(outcome.ok) << describe(outcome);
  EXPECT_EQ(outcomes[2].text, blob);
}

TEST(TcpRendezvousErrors, RankZeroGoneBeforeAnswering) {
  const detail::UniqueFd listener = detail::tcp_listen("127.0.0.1", 0, 1);
  const auto init =
      detail::parse_init_address("tcp://127.0.0.1:" + std::to_string(detail::bound_port(listener)), "t");
  auto closing_server = [&] {
    const detail::Deadline deadline(3000ms);
    if (!detail::wait_readable(listener, deadline)) return std::string("nobody came");
    detail::UniqueFd peer(accept(listener.get(), nullptr, nullptr));
    std::this_thread::sleep_for(100ms);
    return std::string("closed");  // the connection closes here, without an answer
  };
  const auto outcomes = test::run_forked({closing_server, rank_body(rank_env(1, 2, init, 3000ms), "")});
  EXPECT_TRUE(outcomes[0].ok) << describe(outcomes[0]);
  ASSERT_EQ(outcomes[1].code, "comm_error") << describe(outcomes[1]);
  EXPECT_TRUE(contains(outcomes[1], "closed the connection without an answer")) << outcomes[1].text;
}

// --- the job's secret -----------------------------------------------------------------------------------

const std::string job_secret(64, 'a');
const std::string other_secret(64, 'b');

// A rank of a job whose ranks share @p secret (none when empty), read from the environment as a launcher
// sets it.
detail::LaunchEnv secret_env(int rank, int world, const detail::InitAddress& init, const std::string& timeout,
                             const std::string& secret, const std::string& job = "gx:secret-job") {
  std::map<std::string, std::string> values{
      {"GPUXFER_RANK", std::to_string(rank)},
      {"GPUXFER_WORLD_SIZE", std::to_string(world)},
      {"GPUXFER_INIT", "tcp://" + init.host + ":" + std::to_string(init.port)},
      {"GPUXFER_TIMEOUT", timeout},
      {"GPUXFER_JOB_ID", job}};
  if (!secret.empty()) values.emplace("GPUXFER_SECRET", secret);  // none: the rendezvous as without a secret
  test::FakeEnv variables(std::move(values));
  return detail::read_launch_env(variables.lookup());
}

// A process without the secret: connects, sends @p hello (and leaves at once with @p leave), and returns
// every byte rank 0 sent it within a second.
std::function<std::string()> impostor(const detail::InitAddress& init, const detail::Hello& hello,
                                      bool leave = false) {
  return [init, hello, leave] {
    const detail::Deadline deadline(1000ms);
    const detail::UniqueFd socket =
        detail::tcp_connect(init.host, init.port, detail::Deadline(3000ms), "impostor");
    const std::string message = detail::encode(hello);
    (void)detail::send_all(socket, std::as_bytes(std::span<const char>(message.data(), message.size())),
                           deadline);
    std::string received;
    while (!leave && detail::wait_readable(socket, deadline)) {
      if (detail::read_some(socket, received, 1 << 16) == detail::ReadResult::closed) break;
    }
    return received;
  };
}

// Impostors without the secret reach rank 0 first: one claims rank 1 with no job name (once admitted),
// others send what once failed the whole job (another world size, protocol 99, a Hello and a close).
// Rank 0 tells them nothing at all (no blob, no job, no host), none of them fails the job, and the real
// rank 1, which comes last, gets the blob.
TEST(TcpRendezvousSecret, ImpostorsWithoutTheSecretLearnNothingAndTheJobForms) {
  if (!detail::authentication_available())
    GTEST_SKIP() << "built without OpenSSL's libcrypto: no secret to prove";
  const auto init = test::local_tcp();
  const std::string blob = test::pattern_blob(43);
  detail::Hello claims_rank_1;
  claims_rank_1.world_size = 2;
  claims_rank_1.rank = 1;
  claims_rank_1.host = "impostor";
  detail::Hello other_world = claims_rank_1;
  other_world.world_size = 3;
  detail::Hello protocol_99 = claims_rank_1;
  protocol_99.version = 99;
  const auto outcomes = test::run_forked(
      {rank_body(secret_env(0, 2, init, "5", job_secret), blob), impostor(init, claims_rank_1),
       impostor(init, other_world), impostor(init, protocol_99), impostor(init, claims_rank_1, true),
       rank_body(secret_env(1, 2, init, "5", job_secret), "")},
      20s, {0ms, 100ms, 100ms, 100ms, 100ms, 1500ms});
  ASSERT_EQ(outcomes.size(), 6u);
  EXPECT_TRUE(test::every_rank_got({outcomes[0], outcomes[5]}, blob));
  for (std::size_t i = 1; i <= 4; ++i) {
    ASSERT_TRUE(outcomes[i].ok) << describe(outcomes[i]);
    EXPECT_EQ(outcomes[i].text, "") << "impostor " << i << " was told something";
  }
}

// A rank whose secret is not rank 0's: refused before it says who it is, naming the secret; rank 0 goes on
// waiting for the real rank 1 and times out, naming it.
TEST(TcpRendezvousSecret, AWrongSecretIsRefused) {
  if (!detail::authentication_available())
    GTEST_SKIP() << "built without OpenSSL's libcrypto: no secret to prove";
  const auto init = test::local_tcp();
  const auto outcomes = test::run_forked({rank_body(secret_env(0, 2, init, "1.5", job_secret), "b"),
                                          rank_body(secret_env(1, 2, init, "1.5", other_secret), "")});
  ASSERT_EQ(outcomes.size(), 2u);
  ASSERT_EQ(outcomes[0].code, "comm_error") << describe(outcomes[0]);
  EXPECT_TRUE(contains(outcomes[0], "for rank 1 of 2, which never joined")) << outcomes[0].text;
  ASSERT_EQ(outcomes[1].code, "comm_error") << describe(outcomes[1]);
  EXPECT_TRUE(contains(outcomes[1], "GPUXFER_SECRET")) << outcomes[1].text;
}

// A process that holds the port before rank 0 listens and answers like rank 0, with a blob of its own:
// rank 1 rejects it, since it cannot prove the secret.
TEST(TcpRendezvousSecret, AFakeRankZeroHoldingThePortIsRejected) {
  if (!detail::authentication_available())
    GTEST_SKIP() << "built without OpenSSL's libcrypto: no secret to prove";
  const detail::UniqueFd listener = detail::tcp_listen("127.0.0.1", 0, 1);
  const auto init =
      detail::parse_init_address("tcp://127.0.0.1:" + std::to_string(detail::bound_port(listener)), "t");
  auto fake_rank_zero = [&] {
    const detail::Deadline deadline(3000ms);
    if (!detail::wait_readable(listener, deadline)) return std::string("nobody came");
    detail::UniqueFd peer(accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK));
    std::string got;
    (void)detail::wait_readable(peer, deadline);
    (void)detail::read_some(peer, got, 4096);
    const std::string reply = detail::encode(detail::Reply{true, std::string(128, 'F')});
    (void)detail::send_all(peer, std::as_bytes(std::span<const char>(reply.data(), reply.size())), deadline);
    std::this_thread::sleep_for(1500ms);
    return std::string("answered");
  };
  const auto outcomes =
      test::run_forked({fake_rank_zero, rank_body(secret_env(1, 2, init, "2", job_secret), "")});
  EXPECT_TRUE(outcomes[0].ok) << describe(outcomes[0]);
  ASSERT_EQ(outcomes[1].code, "comm_error") << describe(outcomes[1]);
  EXPECT_TRUE(contains(outcomes[1], "secret")) << outcomes[1].text;
}

// Without a secret the rendezvous works as before and says once per process, through the logger, what
// that allows; with one it says nothing of the kind. Each body tries twice to reach a rank 0 that is not
// there, its stderr in a file, and returns how often the warning came.
TEST(TcpRendezvousSecret, WithoutASecretOneWarningPerProcess) {
  if (!detail::authentication_available())
    GTEST_SKIP() << "built without OpenSSL's libcrypto: no secret to prove";
  const auto init = test::local_tcp();
  const auto warnings = [init](const std::string& secret) {
    return [init, secret] {
      char path[] = "/tmp/gpuxfer-stderr-XXXXXX";
      const int fd = mkstemp(path);
      if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) return std::string("no stderr file");
      for (int attempt = 0; attempt < 2; ++attempt) {
        try {
          (void)detail::exchange_blob(secret_env(1, 2, init, "0.1", secret), "");
        } catch (const Error&) {
        }
      }
      std::ifstream file(path);
      const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
      unlink(path);
      std::size_t count = 0;
      for (auto at = text.find("no GPUXFER_SECRET"); at != std::string::npos;
           at = text.find("no GPUXFER_SECRET", at + 1))
        ++count;
      return std::to_string(count);
    };
  };
  const auto outcomes = test::run_forked({warnings(""), warnings(job_secret)}, 20s);
  ASSERT_TRUE(outcomes[0].ok) << describe(outcomes[0]);
  ASSERT_TRUE(outcomes[1].ok) << describe(outcomes[1]);
  EXPECT_EQ(outcomes[0].text, "1");
  EXPECT_EQ(outcomes[1].text, "0");
}

// --- a bounded server -----------------------------------------------------------------------------------

// A process that opens @p count connections to rank 0 one after another and holds them, silent, for
// @p hold: returns how long the connecting took, in ms.
std::function<std::string()> holder(const detail::InitAddress& init, int count,
                                    std::chrono::milliseconds hold) {
  return [init, count, hold] {
    std::vector<detail::UniqueFd> held;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < count; ++i) {
      held.push_back(detail::tcp_connect(init.host, init.port, detail::Deadline(20000ms), "holder"));
    }
    const auto took = std::chrono::steady_clock::now() - start;
    std::this_thread::sleep_for(hold);
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(took).count());
  };
}

// 200 connections one after another (once 9.2 s with a backlog of the world size): accepted at once, and
// the real rank, which comes after them, still joins.
TEST(TcpRendezvousBounded, TwoHundredConnectionsAreAcceptedQuickly) {
  const auto init = test::local_tcp();
  const std::string blob = test::pattern_blob(44);
  const auto outcomes =
      test::run_forked({rank_body(rank_env(0, 2, init, 8000ms), blob), holder(init, 200, 2500ms),
                        rank_body(rank_env(1, 2, init, 8000ms), "")},
                       30s, {0ms, 100ms, 2000ms});
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_TRUE(test::every_rank_got({outcomes[0], outcomes[2]}, blob));
  ASSERT_TRUE(outcomes[1].ok) << describe(outcomes[1]);
  EXPECT_LT(std::stol(outcomes[1].text), 2000) << "ms to open 200 connections";
}

// Rank 0 out of descriptors (a soft limit a few above what it has open) while 40 silent connections wait:
// it drops the oldest of them to make room rather than spin on a failing accept, and the real rank joins.
TEST(TcpRendezvousBounded, RankZeroOutOfDescriptorsDropsTheOldestAndAdmitsTheRank) {
  const auto init = test::local_tcp();
  const std::string blob = test::pattern_blob(45);
  auto rank_zero = [&] {
    std::size_t open_fds = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
      ++open_fds;
    const rlimit limit{open_fds + 8, open_fds + 8};
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return std::string("setrlimit failed");
    return detail::exchange_blob(rank_env(0, 2, init, 6000ms), blob);
  };
  const auto start = std::chrono::steady_clock::now();
  const auto outcomes =
      test::run_forked({rank_zero, holder(init, 40, 4000ms), rank_body(rank_env(1, 2, init, 6000ms), "")},
                       30s, {0ms, 100ms, 1000ms});
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_TRUE(test::every_rank_got({outcomes[0], outcomes[2]}, blob));
  EXPECT_LT(took, 5500ms);
}

}  // namespace
}  // namespace gpuxfer
