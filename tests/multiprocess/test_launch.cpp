// `gpuxfer launch` end to end, starting rank_probe: every line prefixed by its rank, the job's variables
// set and CUDA_VISIBLE_DEVICES left alone, a rendezvous between the ranks it started, the first failing
// exit code returned with the other ranks stopped (SIGTERM, then SIGKILL), signals passed on.
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "bootstrap/secret.hpp"
#include "job.hpp"
#include "launch_run.hpp"

namespace {

using namespace std::chrono_literals;
using gpuxfer::test::LaunchRun;

LaunchRun launch(const std::string& arguments, const std::string& prefix = "") {
  return gpuxfer::test::launch(GPUXFER_CLI, arguments, prefix);
}

const std::string probe = "'" RANK_PROBE "'";

using gpuxfer::test::has;

TEST(GpuxferLaunch, PrefixesEveryLineAndSetsTheEnvironment) {
  const std::string caller = "CUDA_VISIBLE_DEVICES=5,6 GPUXFER_RANK=99 GPUXFER_JOB_ID=the-callers";
  const LaunchRun run = launch("-n 3 -- " + probe + " print", caller);
  ASSERT_EQ(run.code, 0) << run.output;
  std::set<std::string> ports, jobs;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string r = std::to_string(rank);
    const std::regex line(
        "(^|\n)\\[" + r + "\\] rank=" + r + " local=" + r +
        " world=3 init=tcp://127\\.0\\.0\\.1:([0-9]+) cuda=5,6 node=<unset> job=(launch:[^ ]+)\n");
    std::smatch match;
    ASSERT_TRUE(std::regex_search(run.output, match, line)) << "rank " << rank << ":\n" << run.output;
    ports.insert(match[2]);
    jobs.insert(match[3]);
    EXPECT_TRUE(has(run, "[" + r + "] to stderr from " + r + "\n")) << run.output;
    EXPECT_TRUE(has(run, "[" + r + "] no newline at the end\n")) << run.output;
  }
  EXPECT_EQ(ports.size(), 1U) << "the ranks were given different rendezvous ports:\n" << run.output;
  EXPECT_EQ(jobs.size(), 1U) << "the ranks were given different job ids:\n" << run.output;
  // Another launch is another job.
  const LaunchRun again = launch("-n 1 -- " + probe + " print", caller);
  ASSERT_EQ(again.code, 0) << again.output;
  std::smatch other;
  ASSERT_TRUE(std::regex_search(again.output, other, std::regex("job=(launch:[^ ]+)\n"))) << again.output;
  EXPECT_EQ(jobs.count(other[1]), 0U) << "two launches gave one job id: " << other[1];
}

// --node-per-rank: each rank's GPUXFER_NODE_ID is its own (one from the caller's environment replaced).
TEST(GpuxferLaunch, NodePerRankGivesEachRankANodeId) {
  const LaunchRun run = launch("-n 2 --node-per-rank -- " + probe + " print", "GPUXFER_NODE_ID=shared");
  ASSERT_EQ(run.code, 0) << run.output;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank);
    const std::regex line("(^|\n)\\[" + r + "\\] rank=" + r + " .* node=rank" + r + " job=launch:");
    EXPECT_TRUE(std::regex_search(run.output, line)) << "rank " << rank << ":\n" << run.output;
  }
}

// The ranks gpuxfer launch starts share a secret it made (256 bits), which replaces a GPUXFER_SECRET_FILE
// of the caller's, so no rank warns that its rendezvous has none.
TEST(GpuxferLaunch, RanksItStartsShareASecret) {
  if (!gpuxfer::detail::authentication_available())
    GTEST_SKIP() << "built without OpenSSL's libcrypto: no secret to prove";
  const LaunchRun run =
      launch("-n 2 " + probe + " rendezvous", "GPUXFER_TIMEOUT=20 GPUXFER_SECRET_FILE=/nonexistent");
  ASSERT_EQ(run.code, 0) << run.output;
  for (const char* rank : {"0", "1"}) {
    EXPECT_TRUE(has(run, std::string("[") + rank + "] rank " + rank + " has a secret of 256 bits\n"))
        << run.output;
  }
  EXPECT_FALSE(has(run, "no GPUXFER_SECRET")) << run.output;
}

TEST(GpuxferLaunch, RanksItStartsMeetOverTcp) {
  const LaunchRun run = launch("-n 4 " + probe + " rendezvous", "GPUXFER_TIMEOUT=20");
  ASSERT_EQ(run.code, 0) << run.output;
  const std::regex line("\\[([0-9])\\] rank ([0-9]) of 4 got 'blob of rank 0, pid ([0-9]+)'");
  std::set<std::string> ranks;
  std::set<std::string> blobs;
  for (auto it = std::sregex_iterator(run.output.begin(), run.output.end(), line);
       it != std::sregex_iterator(); ++it) {
    EXPECT_EQ((*it)[1], (*it)[2]) << "a line prefixed with another rank: " << it->str();
    ranks.insert((*it)[1]);
    blobs.insert((*it)[3]);
  }
  EXPECT_EQ(ranks.size(), 4U) << run.output;
  EXPECT_EQ(blobs.size(), 1U) << "ranks got different blobs:\n" << run.output;
}

TEST(GpuxferLaunch, FirstFailureStopsTheOthersAndGivesItsCode) {
  const LaunchRun run = launch("-n 3 -- " + probe + " fail 1 7");
  EXPECT_EQ(run.code, 7) << run.output;
  EXPECT_TRUE(has(run, "[1] failing with 7")) << run.output;
  EXPECT_TRUE(has(run, "rank 1 exited with code 7; stopping the other ranks")) << run.output;
  EXPECT_TRUE(has(run, "[0] got signal 15")) << run.output;
  EXPECT_TRUE(has(run, "[2] got signal 15")) << run.output;
  EXPECT_LT(run.took, 10s);
}

TEST(GpuxferLaunch, RanksThatIgnoreSigtermAreKilledAfterTheGrace) {
  const LaunchRun run = launch("-n 3 --grace 0.5 -- " + probe + " stubborn 0 9");
  EXPECT_EQ(run.code, 9) << run.output;
  EXPECT_TRUE(has(run, "[1] ignoring SIGTERM")) << run.output;
  EXPECT_LT(run.took, 10s) << "the stubborn ranks were not killed";
}

TEST(GpuxferLaunch, PassesSignalsOn) {
  // The launcher in the background gets SIGTERM once its ranks wait; each rank must see it.
  const std::string script =
      "sh -c '\"$0\" launch -n 2 -- \"$1\" wait & pid=$!; sleep 1; kill -TERM $pid; wait $pid; "
      "echo rc=$?' '" GPUXFER_CLI "' '" RANK_PROBE "' 2>&1";
  FILE* pipe = popen(("timeout -s KILL 60 " + script).c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, got);
  pclose(pipe);
  EXPECT_NE(output.find("[0] got signal 15"), std::string::npos) << output;
  EXPECT_NE(output.find("[1] got signal 15"), std::string::npos) << output;
  EXPECT_NE(output.find("rc=143"), std::string::npos) << output;
}

// A parent that ignores SIGCHLD passes SIG_IGN on through exec; the launcher must still wait for its ranks
// and see their exit codes (perl sets it: Debian's perl-base is everywhere the tests run).
TEST(GpuxferLaunch, WaitsForItsRanksWhenStartedWithSigchldIgnored) {
  const gpuxfer::test::LaunchRun run = gpuxfer::test::run_shell(
      "timeout -s KILL 20 perl -e '$SIG{CHLD} = \"IGNORE\"; exec @ARGV' '" GPUXFER_CLI
      "' launch -n 2 -- sh -c 'exit 3'");
  EXPECT_EQ(run.code, 3) << run.output;
  EXPECT_LT(run.took, 10s) << run.output;
}

// Rank 1 fails with 5; rank 0, reading a FIFO that rank 1 holds open, fails with 3 30 ms later (cat sees EOF
// as rank 1 exits). Rank 1's output is closed long before, so that only its exit tells. The code is the first
// failure's, 5, and the launcher names every rank that failed. (Rank 0 failing at once can really exit
// first: the cat it wakes may preempt rank 1 before rank 1 is a zombie; then 3 is right.)
TEST(GpuxferLaunch, TheFirstFailureWinsOverOneThatFollowsSoon) {
  const gpuxfer::test::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string fifo = dir.path() + "/fifo";
  const std::string ranks =
      "sh -c 'if [ \"$GPUXFER_RANK\" = 1 ]; then exec 3>\"$0\" >/dev/null 2>&1; sleep 0.3; exit 5; fi; "
      "cat \"$0\"; sleep 0.03; exit 3' '" +
      fifo + "'";
  for (int attempt = 0; attempt < 20; ++attempt) {
    std::remove(fifo.c_str());
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    const LaunchRun run = launch("-n 2 -- " + ranks);
    ASSERT_EQ(run.code, 5) << "attempt " << attempt << ":\n" << run.output;
    EXPECT_TRUE(has(run, "rank 1 exited with code 5; stopping the other ranks")) << run.output;
    EXPECT_TRUE(has(run, "rank 0 exited with code ")) << run.output;
  }
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Launch's stdout closed early (`| head -n 1`): it stops every rank, also one that never writes and would
// otherwise run on without it, and exits with 128 + SIGPIPE, saying why. Rank 0 writes only once rank 1
// has written its pid: under load the launcher could otherwise stop rank 1 before it did (the CI run of
// ae71f54 failed this test once, under ASan, in 0.15 s).
TEST(GpuxferLaunch, StopsTheRanksWhenItsOutputIsClosed) {
  const gpuxfer::test::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string ranks =
      "sh -c 'echo $$ > \"$0/$GPUXFER_RANK.pid\"; if [ \"$GPUXFER_RANK\" = 0 ]; then "
      "while [ ! -s \"$0/1.pid\" ]; do sleep 0.01; done; while echo line; do sleep 0.01; done; fi; "
      "exec sleep 30' '" +
      dir.path() + "'";
  const LaunchRun run =
      gpuxfer::test::run_shell("(timeout -s KILL 20 '" GPUXFER_CLI "' launch -n 2 -- " + ranks + " 2>'" +
                               dir.path() + "/err'; echo $? > '" + dir.path() + "/rc') | head -n 1");
  EXPECT_EQ(run.output, "[0] line\n");
  EXPECT_EQ(file_text(dir.path() + "/rc"), "141\n");
  EXPECT_NE(file_text(dir.path() + "/err").find("its standard output is closed; stopping the ranks"),
            std::string::npos)
      << file_text(dir.path() + "/err");
  EXPECT_LT(run.took, 10s);
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = std::atoi(file_text(dir.path() + "/" + std::to_string(rank) + ".pid").c_str());
    ASSERT_GT(pid, 0) << "rank " << rank << " wrote no pid";
    EXPECT_TRUE(kill(pid, 0) != 0 && errno == ESRCH) << "rank " << rank << " (pid " << pid << ") runs on";
    if (kill(pid, 0) == 0) kill(-pid, SIGKILL);  // its process group, so as not to leave it behind
  }
}

// Whether @p pid runs (a zombie that nobody reaped yet does not).
bool runs(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  const std::string stat = file_text("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'Z';
}

// kill -9 of the launcher cannot pass anything on: its ranks must die with it (PR_SET_PDEATHSIG), not run
// on as orphans holding their GPUs.
TEST(GpuxferLaunch, RanksDieWithAKilledLauncher) {
  const gpuxfer::test::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string ranks = "sh -c 'echo $$ > \"$0/$GPUXFER_RANK.pid\"; exec sleep 30' '" + dir.path() + "'";
  const LaunchRun run = gpuxfer::test::run_shell("'" GPUXFER_CLI "' launch -n 2 -- " + ranks +
                                                 " >/dev/null 2>&1 & launcher=$!; for i in $(seq 500); do "
                                                 "[ -s '" +
                                                 dir.path() + "/0.pid' ] && [ -s '" + dir.path() +
                                                 "/1.pid' ] && break; sleep 0.01; done; "
                                                 "kill -KILL $launcher");
  ASSERT_EQ(run.code, 0) << run.output;
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = std::atoi(file_text(dir.path() + "/" + std::to_string(rank) + ".pid").c_str());
    ASSERT_GT(pid, 0) << "rank " << rank << " wrote no pid";
    const auto until = std::chrono::steady_clock::now() + 3s;
    while (runs(pid) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(runs(pid)) << "rank " << rank << " (pid " << pid << ") outlived its launcher";
    if (runs(pid)) kill(-pid, SIGKILL);  // its process group, so as not to leave it behind
  }
}

// Started with SIGHUP ignored (nohup, or a shell's trap ""), the launcher leaves it ignored, for itself and
// for its ranks, and does not pass it on; SIGTERM still is.
TEST(GpuxferLaunch, LeavesASignalIgnoredOnEntryAlone) {
  const LaunchRun run = gpuxfer::test::run_shell(
      "timeout -s KILL 60 sh -c 'trap \"\" HUP; \"$0\" launch -n 2 -- \"$1\" wait & pid=$!; sleep 1; "
      "kill -HUP $pid; sleep 0.5; kill -TERM $pid; wait $pid; echo rc=$?' '" GPUXFER_CLI "' '" RANK_PROBE
      "'");
  EXPECT_FALSE(has(run, "passing signal 1 on")) << run.output;
  EXPECT_TRUE(has(run, "[0] got signal 15")) << run.output;
  EXPECT_TRUE(has(run, "[1] got signal 15")) << run.output;
  EXPECT_TRUE(has(run, "rc=143")) << run.output;
}

TEST(GpuxferLaunch, AProgramThatCannotRun) {
  const LaunchRun run = launch("-n 2 -- /nonexistent/gpuxfer-program");
  EXPECT_EQ(run.code, 127) << run.output;
  EXPECT_TRUE(has(run, "cannot run '/nonexistent/gpuxfer-program'")) << run.output;
}

TEST(GpuxferLaunch, BadArguments) {
  const LaunchRun none = launch("-n 2");
  EXPECT_EQ(none.code, 1) << none.output;
  EXPECT_TRUE(has(none, "gpuxfer: invalid_option: launch: no program given")) << none.output;
  const LaunchRun zero = launch("-n 0 -- true");
  EXPECT_EQ(zero.code, 1) << zero.output;
  EXPECT_TRUE(has(zero, "-n 0")) << zero.output;
}

// A rank has the launcher's descriptors only as its caller gave them (here: the probe run straight from the
// same shell), with 0, 1 and 2 replaced: none of the launcher's own (/dev/null, its pipes) leaks into it,
// but for rank 0 the rendezvous's listening socket.
TEST(GpuxferLaunch, RanksGetNoDescriptorOfTheLauncher) {
  const LaunchRun run = gpuxfer::test::run_shell(
      probe + " fds; timeout -s KILL 60 '" GPUXFER_CLI "' launch -n 2 -- " + probe + " fds");
  ASSERT_EQ(run.code, 0) << run.output;
  const std::size_t end = run.output.find('\n');
  ASSERT_TRUE(run.output.starts_with("fds 0 1 2") && end != std::string::npos) << run.output;
  const std::string fds = run.output.substr(0, end + 1);
  EXPECT_TRUE(has(run, "[0] " + fds)) << "the caller's: " << fds << run.output;
  EXPECT_TRUE(has(run, "[1] " + fds)) << "the caller's: " << fds << run.output;
  // Rank 0's one more: the rendezvous's listening socket, GPUXFER_LISTEN_FD.
  EXPECT_TRUE(has(run, "[0] listen fd ")) << run.output;
  EXPECT_TRUE(has(run, " is a listening socket")) << run.output;
  EXPECT_FALSE(has(run, "[1] listen fd ")) << run.output;
}

// The launcher listens on the rendezvous's port itself and hands the socket to rank 0 (GPUXFER_LISTEN_FD):
// a process that tries to take the port once the ranks run (here each rank's, before it starts the
// probe) finds it taken, and the job forms on the launcher's socket.
TEST(GpuxferLaunch, AProcessRacingForThePortCannotTakeIt) {
  const LaunchRun run = launch("-n 2 -- " + probe + " squat " + probe + " rendezvous", "GPUXFER_TIMEOUT=20");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(has(run, "[0] squat: the port is taken")) << run.output;
  EXPECT_TRUE(has(run, "[1] squat: the port is taken")) << run.output;
  EXPECT_TRUE(has(run, "[1] rank 1 of 2 got 'blob of rank 0, pid")) << run.output;
}

// --timeout: rank 0 finished (code 0) while the others hang: when it passes, the launcher says which
// ranks exited, with which code, and which still run, stops those, and exits with 124.
TEST(GpuxferLaunch, ATimeoutNamesTheRanksThatExitedAndThoseStillRunning) {
  const LaunchRun run = launch("--timeout 1.5 -n 3 -- " + probe + " fail 0 0");
  EXPECT_EQ(run.code, 124) << run.output;
  EXPECT_TRUE(has(run,
                  "gpuxfer launch: --timeout 1.5 s passed with ranks 1, 2 still running (rank 0 exited "
                  "with code 0); stopping them"))
      << run.output;
  EXPECT_TRUE(has(run, "[1] got signal 15")) << run.output;
  EXPECT_LT(run.took, 10s) << run.output;
  const LaunchRun in_time = launch("--timeout 20 -n 2 -- " + probe + " print");
  EXPECT_EQ(in_time.code, 0) << in_time.output;
  for (const std::string timeout : {"0", "-1", "nan", "inf", "1e300"}) {
    const LaunchRun bad = launch("--timeout " + timeout + " -n 1 -- true");
    EXPECT_EQ(bad.code, 1) << timeout << ": " << bad.output;
    EXPECT_TRUE(has(bad, "gpuxfer: invalid_option: gpuxfer launch: --timeout "))
        << timeout << ": " << bad.output;
  }
}

// --grace takes 0 to a day: inf or 1e300 once overflowed the conversion to milliseconds (a SIGKILL at once).
TEST(GpuxferLaunch, AGraceOfMoreThanADayIsRefused) {
  for (const std::string grace : {"inf", "1e300", "86401", "-1", "nan"}) {
    const LaunchRun run = launch("--grace " + grace + " -n 1 -- true");
    EXPECT_EQ(run.code, 1) << grace << ": " << run.output;
    EXPECT_TRUE(has(run, "gpuxfer: invalid_option: launch --grace ")) << grace << ": " << run.output;
    EXPECT_TRUE(has(run, ": 0 to 86400 seconds")) << grace << ": " << run.output;
  }
  EXPECT_EQ(launch("--grace 86400 -n 1 -- true").code, 0);
}

}  // namespace
