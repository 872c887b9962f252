// Communicator across processes on GPUs, through comm_probe: a world of one on one GPU, a world of two
// started by `gpuxfer launch -n 2` (every operation, byte for byte; gather_to_host and broadcast_from_host
// through the shared segment, and with each rank a node of its own over NCCL), the operations that need no
// host wait captured into a CUDA graph and replayed, and a rank that leaves before NCCL
// (the other fails within GPUXFER_TIMEOUT, naming it), two ranks on one GPU (refused, naming both), a
// first host operation that waits for no GPU work, a blocking host operation whose NCCL work fails
// part-way between nodes (that rank throws its own error at once), and a communicator released after a
// timeout that the caller's kernel caused (within the timeout). Skips, saying why, without enough GPUs.
#include <chrono>
#include <string>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "launch_run.hpp"

namespace {

using namespace std::chrono_literals;
using gpuxfer::test::has;
using gpuxfer::test::LaunchRun;

const std::string probe = "'" COMM_PROBE "'";

// NCCL's network transport, the path between nodes, on one machine: environment for a launch.
#define NETWORK_PATH "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo"

// Skips the test unless CUDA sees at least @p needed GPUs (cudaGetDeviceCount makes no context).
#define REQUIRE_GPUS(needed)                                                                          \
  do {                                                                                                \
    int count = 0;                                                                                    \
    const cudaError_t status = cudaGetDeviceCount(&count);                                            \
    if (status != cudaSuccess) GTEST_SKIP() << "no GPU: " << cudaGetErrorName(status);                \
    if (count < (needed)) GTEST_SKIP() << "needs " << (needed) << " GPUs, CUDA sees " << count;       \
  } while (0)

LaunchRun launch(const std::string& arguments, const std::string& prefix = "") {
  return gpuxfer::test::launch(GPUXFER_CLI, arguments, prefix);
}

// Every rank of @p world printed "[R] rank R of <world>: <line>".
void expect_every_rank(const LaunchRun& run, int world, const std::string& line) {
  for (int r = 0; r < world; ++r) {
    const std::string rank = std::to_string(r);
    EXPECT_TRUE(has(run, "[" + rank + "] rank " + rank + " of " + std::to_string(world) + ": " + line)) << run.output;
  }
}

// The first line of @p run's output that starts with @p start, or "" when none does.
std::string line_of(const LaunchRun& run, const std::string& start) {
  std::size_t at = run.output.find(start);
  while (at != std::string::npos && at != 0 && run.output[at - 1] != '\n')
    at = run.output.find(start, at + 1);
  if (at == std::string::npos) return {};
  return run.output.substr(at, run.output.find('\n', at) - at);
}

// `gpuxfer launch -n <world> -- comm_probe <mode>` with @p env in front exits 0, every rank printing
// @p line.
void expect_job_passes(int world, const std::string& mode, const std::string& env, const std::string& line) {
  const LaunchRun run = launch("-n " + std::to_string(world) + " -- " + probe + " " + mode, env);
  EXPECT_EQ(run.code, 0) << run.output;
  expect_every_rank(run, world, line);
}

TEST(CommunicatorGpu, AWorldOfOneRunsEveryOperation) {
  REQUIRE_GPUS(1);
  const LaunchRun run = launch("-n 1 -- " + probe + " ops", "GPUXFER_TIMEOUT=60");
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(has(run, "[0] rank 0 of 1: ")) << run.output;
  EXPECT_TRUE(has(run, " checks passed")) << run.output;
  // gather_to_host's results reused the root's segment once dropped, and none is left after them.
  EXPECT_TRUE(has(run, "[0] rank 0 of 1: no shared segment left")) << run.output;
}

TEST(CommunicatorGpu, AWorldOfTwoRunsEveryOperation) {
  REQUIRE_GPUS(2);
  const LaunchRun run = launch("-n 2 -- " + probe + " ops", "GPUXFER_TIMEOUT=60 GPUXFER_LOG_LEVEL=info");
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(has(run, "[0] rank 0 of 2: ")) << run.output;
  EXPECT_TRUE(has(run, "[1] rank 1 of 2: ")) << run.output;
  EXPECT_FALSE(has(run, "FAILED")) << run.output;
  expect_every_rank(run, 2, "no shared segment left");
  // One node: gather_to_host's and broadcast_from_host's rank 1 go through the shared segment.
  EXPECT_TRUE(has(run, "rank 1 of 2 (device 1): on node '")) << run.output;
  EXPECT_TRUE(has(run, "', with the node of rank 0")) << run.output;
}

// The operations that need no host wait, captured into a CUDA graph and replayed 100 times, each replay
// behind a producer writing new bytes, every replay verified; the others refused while capturing.
TEST(CommunicatorGpu, AWorldOfOneReplaysCapturedOperations) {
  REQUIRE_GPUS(1);
  expect_job_passes(1, "graphs", "GPUXFER_TIMEOUT=60", "100 replays verified");
}

TEST(CommunicatorGpu, AWorldOfTwoReplaysCapturedOperations) {
  REQUIRE_GPUS(2);
  expect_job_passes(2, "graphs", "GPUXFER_TIMEOUT=60", "100 replays verified");
}

// The blocking operations on another thread while a stream captures in global mode: every byte right,
// the capture intact.
TEST(CommunicatorGpu, AWorldOfOneWorksBesideAGlobalModeCapture) {
  REQUIRE_GPUS(1);
  expect_job_passes(1, "beside-capture", "GPUXFER_TIMEOUT=60", "beside a capture, ");
}

// A Communicator made, used and released on another thread while a stream captures in global mode.
// Disabled: a known failure (stop 23, NCCL 2.28 on nvidia-h200): ncclCommInitRankConfig fails with
// "unhandled cuda error" and the capture ends cudaErrorStreamCaptureInvalidated. By NCCL's source, a
// non-blocking init runs on a thread NCCL starts (group.cc), in the default global mode, and synchronises
// a stream there (devCommSetup); gpuxfer can relax only the calling thread. Run it with
// --gtest_also_run_disabled_tests.
TEST(CommunicatorGpu, DISABLED_ANewWorldOfOneWorksBesideAGlobalModeCapture) {
  REQUIRE_GPUS(1);
  expect_job_passes(1, "beside-capture setup", "GPUXFER_TIMEOUT=60", "beside a capture, ");
}

TEST(CommunicatorGpu, AWorldOfTwoWorksBesideAGlobalModeCapture) {
  REQUIRE_GPUS(2);
  expect_job_passes(2, "beside-capture", "GPUXFER_TIMEOUT=60", "beside a capture, ");
}

// NCCL's network transport, the path between nodes, on one machine.
TEST(CommunicatorGpu, AWorldOfTwoOverTheNetworkTransport) {
  REQUIRE_GPUS(2);
  const LaunchRun run = launch("-n 2 -- " + probe + " ops", "GPUXFER_TIMEOUT=60 " NETWORK_PATH);
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(has(run, "[1] rank 1 of 2: ")) << run.output;
  EXPECT_FALSE(has(run, "FAILED")) << run.output;
}

// Each rank on a node of its own (GPUXFER_NODE_ID): gather_to_host's and broadcast_from_host's bytes go
// over NCCL with the root's GPU, here through the network transport, as between two machines.
TEST(CommunicatorGpu, AWorldOfTwoOnTwoNodesGathersToTheHostOverNccl) {
  REQUIRE_GPUS(2);
  const LaunchRun run = launch("-n 2 -- " + probe + " ops separate-nodes",
                               "GPUXFER_TIMEOUT=60 GPUXFER_LOG_LEVEL=info " NETWORK_PATH);
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(has(run, "[1] rank 1 of 2: ")) << run.output;
  EXPECT_FALSE(has(run, "FAILED")) << run.output;
  EXPECT_TRUE(has(run, "on node 'GPUXFER_NODE_ID=comm-probe-rank-1 ")) << run.output;
  EXPECT_TRUE(has(run, "', with the node of rank 1")) << run.output;
}

// The same with rank 1 on a node of 64 KiB pages (through page_size, LD_PRELOAD) and the root on one of the
// machine's: every rank plans each gather_to_host with the root's page size, so that all of them decide
// alike whether the root's offer fits (with its own, rank 1 found a reused segment too small and waited for
// a "ready" the root never sent).
TEST(CommunicatorGpu, AWorldOfTwoOnNodesOfDifferentPageSizesAgreesOnEveryGather) {
  REQUIRE_GPUS(2);
  const LaunchRun run =
      launch("-n 2 -- " + probe + " ops separate-nodes",
             "LD_PRELOAD='" PAGE_SIZE
             "' GPUXFER_TEST_PAGE_SIZE=65536 GPUXFER_TEST_PAGE_SIZE_RANK=1 GPUXFER_TIMEOUT=30 " NETWORK_PATH);
  EXPECT_EQ(run.code, 0) << run.output;
  expect_every_rank(run, 2, "");
  EXPECT_FALSE(has(run, "FAILED")) << run.output;
  EXPECT_LT(run.took, 60s) << "a rank waited for an exchange the others did not make:\n" << run.output;
}

// A new communicator's first host operation, stream-ordered behind a slow producer on rank 1, returns
// before that producer is done: nothing of it waits for the device (the ranks' node exchange, made at
// creation, neither). Each rank a node of its own: rank 1 sends over NCCL.
TEST(CommunicatorGpu, AFirstHostOperationBetweenNodesWaitsForNoGpuWork) {
  REQUIRE_GPUS(2);
  expect_job_passes(2, "first-host-op separate-nodes", "GPUXFER_TIMEOUT=60 " NETWORK_PATH,
                    "a first host operation, ");
}

// The same on one node: rank 1 maps the root's segment (page-locked in that first call) and copies into it.
TEST(CommunicatorGpu, AFirstHostOperationOnOneNodeWaitsForNoGpuWork) {
  REQUIRE_GPUS(2);
  expect_job_passes(2, "first-host-op", "GPUXFER_TIMEOUT=60", "a first host operation, ");
}

// A stream-ordered gather_to_host behind a slow producer that makes the root's arena let go of a segment
// (a fifth size after four), and the other ranks of its node of a mapping: cudaHostUnregister waits for the
// device's work, so the letting go must not happen in the call.
TEST(CommunicatorGpu, AWorldOfOneLetsGoOfASegmentWithoutWaitingForGpuWork) {
  REQUIRE_GPUS(1);
  expect_job_passes(1, "let-go-behind-producer", "GPUXFER_TIMEOUT=60", "letting go of segments, ");
}

// A blocking broadcast_from_host held up past the timeout by a kernel on the legacy default stream (the
// caller's work, not gpuxfer's): the call fails with comm_error within the timeout, though ncclCommAbort
// waits for that kernel (it frees device memory), and releasing the communicator then ends within the
// timeout too instead of waiting for the kernel (its stream waits for it, and cudaFree waits for the device).
TEST(CommunicatorGpu, AWorldOfOneReleasedAfterATimeoutDoesNotWaitForTheCallersKernel) {
  REQUIRE_GPUS(1);
  expect_job_passes(1, "release-after-timeout", "GPUXFER_TIMEOUT=2", "released after a timeout: ");
}

TEST(CommunicatorGpu, AWorldOfTwoLetsGoOfSegmentsWithoutWaitingForGpuWork) {
  REQUIRE_GPUS(2);
  expect_job_passes(2, "let-go-behind-producer", "GPUXFER_TIMEOUT=60", "letting go of segments, ");
}

// comm_probe's fail-part-way @p operation on two ranks of nodes of their own, nccl_fault preloaded, with
// @p env too.
LaunchRun fail_part_way(const std::string& operation, const std::string& env = "") {
  return launch("-n 2 -- " + probe + " fail-part-way " + operation,
                "LD_PRELOAD='" NCCL_FAULT "' " + env + " GPUXFER_TIMEOUT=40 " NETWORK_PATH);
}

// A blocking host operation between nodes whose NCCL work fails part-way on rank 1 (an ncclSend or
// ncclRecv refused, through nccl_fault): rank 1 throws its own error at once, not "not complete" at the
// timeout, and the job ends well within it.
void expect_failed_part_way(const std::string& operation) {
  const LaunchRun run = fail_part_way(operation);
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_TRUE(has(run, "[1] rank 1 of 2: failed after ")) << run.output;
  EXPECT_TRUE(has(run, "gpuxfer nccl_error: ")) << run.output;
  EXPECT_FALSE(has(run, "the call did not fail")) << run.output;
  EXPECT_LT(run.took, 20s) << "rank 1 waited instead of failing at once:\n" << run.output;
}

// The same refusal as NCCL gives once a peer or its link failed (ncclRemoteError at the call, before its
// asynchronous error says so): rank 1 aborts the communicator and throws comm_error naming the peer, and
// the call made again says the communicator was aborted (not NCCL's error once more).
TEST(CommunicatorGpu, AGatherToHostWhosePeerFailedAtTheCallAbortsTheCommunicator) {
  REQUIRE_GPUS(2);
  const LaunchRun run = fail_part_way("gather", "GPUXFER_TEST_FAIL_NCCL_AS=remote COMM_PROBE_CALL_AGAIN=1");
  EXPECT_EQ(run.code, 1) << run.output;
  const std::string failed = line_of(run, "[1] rank 1 of 2: failed after ");
  EXPECT_NE(failed.find("gpuxfer comm_error: "), std::string::npos) << run.output;
  EXPECT_NE(failed.find("rank 0, or its link, failed"), std::string::npos) << run.output;
  EXPECT_NE(line_of(run, "[1] rank 1 of 2: the call again: ").find("aborted by an earlier failure"),
            std::string::npos)
      << run.output;
  EXPECT_LT(run.took, 20s) << "rank 1 waited instead of failing at once:\n" << run.output;
}

TEST(CommunicatorGpu, AGatherToHostFailingPartWayBetweenNodesFailsAtOnce) {
  REQUIRE_GPUS(2);
  expect_failed_part_way("gather");
}

TEST(CommunicatorGpu, ABroadcastFromHostFailingBetweenNodesFailsAtOnce) {
  REQUIRE_GPUS(2);
  expect_failed_part_way("broadcast");
}

void expect_named(int leaver) {
  const int survivor = 1 - leaver;
  const LaunchRun run = launch("-n 2 -- " + probe + " exit-early " + std::to_string(leaver), "GPUXFER_TIMEOUT=5");
  EXPECT_EQ(run.code, 1) << run.output;
  // Appended piece by piece: GCC 12 warns (-Wrestrict, wrongly) on the chain of + here.
  std::string prefix = "[";
  prefix.append(std::to_string(survivor)).append("] comm_probe: gpuxfer comm_error: rank ");
  prefix.append(std::to_string(survivor)).append(" of 2");
  EXPECT_TRUE(has(run, prefix)) << run.output;
  EXPECT_TRUE(has(run, "rank " + std::to_string(leaver))) << run.output;
  EXPECT_TRUE(has(run, "the NCCL communicator is aborted")) << run.output;
  EXPECT_LT(run.took, 30s) << "the survivor took longer than GPUXFER_TIMEOUT allows:\n" << run.output;
}

TEST(CommunicatorGpu, ARankThatLeavesBeforeNcclIsNamed) {
  REQUIRE_GPUS(2);
  expect_named(1);
}

TEST(CommunicatorGpu, RankZeroLeavingBeforeNcclIsNamed) {
  REQUIRE_GPUS(2);
  expect_named(0);
}

// Two ranks told to drive one GPU (CommunicatorOptions::device = 0 on both): the rendezvous compares the
// GPUs' UUIDs and refuses the job on both ranks, naming them, before NCCL would fail without a name.
TEST(CommunicatorGpu, TwoRanksOnOneGpuAreRefusedNamingBoth) {
  REQUIRE_GPUS(1);
  const LaunchRun run = launch("-n 2 -- " + probe + " one-gpu", "GPUXFER_TIMEOUT=30");
  EXPECT_NE(run.code, 0) << run.output;
  for (const char* rank : {"[0] comm_probe: gpuxfer comm_error: ", "[1] comm_probe: gpuxfer comm_error: "}) {
    EXPECT_TRUE(has(run, rank)) << run.output;
  }
  EXPECT_TRUE(has(run, "rank 1 (local rank 1 on ")) << run.output;
  EXPECT_TRUE(has(run, "and rank 0 (local rank 0 on ")) << run.output;
  EXPECT_TRUE(has(run, "both drive GPU-")) << run.output;
  EXPECT_LT(run.took, 20s) << run.output;
}

}  // namespace
