// `gpuxfer launch -n N [--] program args...`: N processes of one job on this host, each with GPUXFER_RANK,
// GPUXFER_LOCAL_RANK, GPUXFER_WORLD_SIZE, GPUXFER_INIT (a TCP rendezvous on a free local port) and
// GPUXFER_JOB_ID (the same for the job's ranks, another for any other job) and GPUXFER_SECRET (256 random
// bits made for the job, which its ranks prove to each other at the rendezvous) set
// (and, with --node-per-rank, GPUXFER_NODE_ID=rank<i>: each rank a node of its own); rank 0 of several
// inherits the socket the launcher listens on at that port (GPUXFER_LISTEN_FD), so that no other process
// can take the port between the launcher's choice and rank 0's rendezvous;
// CUDA_VISIBLE_DEVICES left as it is. Their output comes back line by line, prefixed "[rank] "; the first
// rank to fail stops the others (SIGTERM, SIGKILL after the grace period) and gives its exit code;
// SIGINT, SIGTERM and SIGHUP are passed on to every rank (unless ignored when it starts); a reader of its
// output that goes away stops them too; a launcher killed outright takes them with it (PR_SET_PDEATHSIG);
// with --timeout, ranks still running then are named with the exits so far, and stopped.

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gpuxfer/error.hpp>

#include "bootstrap/secret.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/wire.hpp"
#include "commands.hpp"
#include "rank_output.hpp"
#include "runtime/cuda_check.hpp"

extern char** environ;

namespace gpuxfer::cli {
namespace {

using Clock = std::chrono::steady_clock;
using detail::UniqueFd;

volatile std::sig_atomic_t pending_signal = 0;
extern "C" void remember_signal(int signal) { pending_signal = signal; }

constexpr int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP};
// How long the output of ranks that have all exited may still come (from processes they left running).
constexpr std::chrono::milliseconds output_drain{1000};
// The longest --grace: a day, far from overflowing the conversion to milliseconds (inf, 1e300 did).
constexpr double max_grace_seconds = 86400;
// The longest --timeout: a year.
constexpr double max_timeout_seconds = 365 * 86400.0;

struct Rank {
  int index = 0;
  pid_t pid = -1;
  bool running = false;
  std::optional<int> code;  // once it exited
  UniqueFd out;             // read ends of the rank's stdout and stderr
  UniqueFd err;
  RankOutput out_lines;
  RankOutput err_lines;

  explicit Rank(int i) : index(i), out_lines(i, stdout), err_lines(i, stderr) {}
};

// Without -n: one rank per visible GPU. cudaGetDeviceCount creates no context.
int visible_gpus() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    throw Error(Errc::invalid_option, std::string("launch: no GPU is visible (") +
                                          (status != cudaSuccess ? gpuxfer::detail::describe_cuda_error(status) : "0 devices") +
                                          "): say how many processes to start with -n N");
  }
  return count;
}

// What every rank of the job is told.
struct Job {
  int world = 0;
  int port = 0;        ///< of the rendezvous, on 127.0.0.1
  UniqueFd listener;   ///< listening there, close-on-exec, for rank 0 (GPUXFER_LISTEN_FD); none for 1 rank
  std::string id;      ///< GPUXFER_JOB_ID: this host, this launcher's pid and the port
  std::string secret;  ///< GPUXFER_SECRET: 256 random bits in hex, made for this job
  bool node_per_rank = false;
};

// The environment of one rank: ours, with the variables of the job replacing any we had (and
// GPUXFER_NODE_ID, with node_per_rank).
std::vector<std::string> rank_environment(int rank, const Job& of) {
  std::vector<std::string> job{
      "GPUXFER_RANK=" + std::to_string(rank), "GPUXFER_LOCAL_RANK=" + std::to_string(rank),
      "GPUXFER_WORLD_SIZE=" + std::to_string(of.world),
      "GPUXFER_INIT=tcp://127.0.0.1:" + std::to_string(of.port), "GPUXFER_JOB_ID=" + of.id};
  if (!of.secret.empty()) job.push_back("GPUXFER_SECRET=" + of.secret);
  if (rank == 0 && of.listener) job.push_back("GPUXFER_LISTEN_FD=" + std::to_string(of.listener.get()));
  // The job's own secret replaces a file the caller named (both set is refused); a listening socket the
  // caller was handed is not the ranks'.
  const std::vector<std::string> replaced_too{"GPUXFER_SECRET_FILE=", "GPUXFER_LISTEN_FD="};
  if (of.node_per_rank) job.push_back("GPUXFER_NODE_ID=rank" + std::to_string(rank));
  std::vector<std::string> out;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    bool replaced = false;
    for (const std::string& other : replaced_too) replaced = replaced || text.starts_with(other);
    for (const std::string& own : job)
      replaced = replaced || text.starts_with(own.substr(0, own.find('=') + 1));
    if (!replaced) out.push_back(text);
  }
  out.insert(out.end(), job.begin(), job.end());
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& texts) {
  std::vector<char*> out;
  for (std::string& text : texts) out.push_back(text.data());
  out.push_back(nullptr);
  return out;
}

// Both ends closed on exec: the rank gets its write end by dup2, and no rank another's.
struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Pipe cloexec_pipe() {
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0)
    throw Error(Errc::invalid_argument, std::string("launch: pipe failed: ") + std::strerror(errno));
  return {UniqueFd(ends[0]), UniqueFd(ends[1])};
}

// In the child: @p fd as @p target, kept on exec (dup2 onto itself would leave FD_CLOEXEC set).
void place(int fd, int target) {
  if (fd == target) {
    fcntl(fd, F_SETFD, 0);
  } else {
    dup2(fd, target);
  }
}

// @p signal_mask: the mask to give the rank (ours as we started, before we blocked SIGCHLD and SIGPIPE).
void start(Rank& rank, const Job& job, std::vector<std::string> command, const sigset_t& signal_mask) {
  Pipe out = cloexec_pipe();
  Pipe err = cloexec_pipe();
  std::vector<std::string> environment = rank_environment(rank.index, job);
  const std::vector<char*> argv = pointers(command);
  const std::vector<char*> envp = pointers(environment);
  const pid_t launcher = getpid();
  const pid_t pid = fork();
  if (pid < 0)
    throw Error(Errc::invalid_argument, std::string("launch: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // The child: dies with the launcher (kill -9 of it passes nothing on; the ranks would run on holding
    // their GPUs), checked after setting it in case the launcher died first; its own process group (so a
    // signal reaches what it starts too), stdin from /dev/null.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(128 + SIGKILL);
    setpgid(0, 0);
    sigprocmask(SIG_SETMASK, &signal_mask, nullptr);
    place(open("/dev/null", O_RDONLY | O_CLOEXEC), STDIN_FILENO);
    place(out.write.get(), STDOUT_FILENO);
    place(err.write.get(), STDERR_FILENO);
    if (rank.index == 0 && job.listener) place(job.listener.get(), job.listener.get());  // kept on exec
    execvpe(argv[0], argv.data(), envp.data());
    // No allocation between fork and _exit: the parent may have had other threads (CUDA's).
    const char* reason = std::strerror(errno);
    for (const char* piece :
         {"gpuxfer launch: cannot run '", static_cast<const char*>(argv[0]), "': ", reason, "\n"}) {
      (void)!write(STDERR_FILENO, piece, std::strlen(piece));
    }
    _exit(127);
  }
  setpgid(pid, pid);  // as the child does: whichever runs first
  rank.out = std::move(out.read);
  rank.err = std::move(err.read);
  rank.pid = pid;
  rank.running = true;
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Every rank's process group, if still running.
void signal_all(std::vector<Rank>& ranks, int signal) {
  for (const Rank& rank : ranks) {
    if (rank.running) kill(-rank.pid, signal);
  }
}

// Moves what one pipe has into its lines; closes it at EOF.
void drain(UniqueFd& fd, RankOutput& lines) {
  char buffer[65536];
  const ssize_t got = read(fd.get(), buffer, sizeof(buffer));
  if (got > 0) {
    lines.feed(std::string_view(buffer, static_cast<std::size_t>(got)));
  } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
    lines.finish();
    fd = UniqueFd();
  }
}

class Supervisor {
 public:
  /// @p exits: a signalfd of SIGCHLD. @p timeout_seconds: --timeout, 0 for none.
  Supervisor(std::vector<Rank>& ranks, std::chrono::milliseconds grace, const UniqueFd& exits,
             double timeout_seconds)
      : ranks_(ranks), grace_(grace), exits_(exits), timeout_seconds_(timeout_seconds) {
    if (timeout_seconds > 0) {
      timeout_at_ = Clock::now() + std::chrono::milliseconds(static_cast<long long>(timeout_seconds * 1000));
    }
  }

  int run() {
    std::optional<Clock::time_point> all_exited;
    while (true) {
      forward_signal();
      pump_output();
      check_output();
      reap();
      check_timeout();
      if (stop_at_ && Clock::now() >= *stop_at_ && !killed_) {
        signal_all(ranks_, SIGKILL);
        killed_ = true;
      }
      if (running() == 0) {
        if (!all_exited) all_exited = Clock::now();
        if (!output_open() || Clock::now() - *all_exited > output_drain) break;
      }
    }
    for (Rank& rank : ranks_) {
      rank.out_lines.finish();
      rank.err_lines.finish();
    }
    if (first_failure_) return *first_failure_;
    if (timed_out_) return timed_out_code;
    return signal_ != 0 ? 128 + signal_ : 0;
  }

  /// The exit code after --timeout stopped the ranks (as coreutils' timeout).
  static constexpr int timed_out_code = 124;

 private:
  std::size_t running() const {
    std::size_t count = 0;
    for (const Rank& rank : ranks_) count += rank.running ? 1 : 0;
    return count;
  }

  bool output_open() const {
    for (const Rank& rank : ranks_) {
      if (rank.out || rank.err) return true;
    }
    return false;
  }

  void stop_others() {
    if (stop_at_) return;
    signal_all(ranks_, SIGTERM);
    stop_at_ = Clock::now() + grace_;
  }

  // --timeout passed with ranks still running, and nothing stopping them yet: which exited, with which
  // code, and which still run (a rank 0 that finished while the others hang shows here), then stopped.
  void check_timeout() {
    if (!timeout_at_ || timed_out_ || stop_at_ || Clock::now() < *timeout_at_ || running() == 0) return;
    timed_out_ = true;
    std::string still;
    std::string exited;
    std::size_t still_count = 0;
    for (const Rank& rank : ranks_) {
      if (rank.running) {
        still += (still.empty() ? "" : ", ") + std::to_string(rank.index);
        ++still_count;
      } else if (rank.code) {
        exited += std::string(exited.empty() ? "rank " : ", rank ") + std::to_string(rank.index) +
                  " exited with code " + std::to_string(*rank.code);
      }
    }
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%g", timeout_seconds_);
    std::fprintf(stderr,
                 "gpuxfer launch: --timeout %s s passed with %s %s still running (%s); stopping them\n",
                 seconds, still_count == 1 ? "rank" : "ranks", still.c_str(),
                 exited.empty() ? "none exited" : exited.c_str());
    stop_others();
  }

  void forward_signal() {
    const int signal = pending_signal;
    if (signal == 0) return;
    pending_signal = 0;
    signal_ = signal;
    std::fprintf(stderr, "gpuxfer launch: passing signal %d on to every rank\n", signal);
    signal_all(ranks_, signal);
    if (!stop_at_) stop_at_ = Clock::now() + grace_;
  }

  // A reader of our output that went away (`| head`): the ranks are stopped as after a failure, and the
  // code is 128 + SIGPIPE (unless a failure came first).
  void check_output() {
    if (output_closed_) return;
    for (const Rank& rank : ranks_) {
      const char* which = rank.out_lines.closed() ? "output" : rank.err_lines.closed() ? "error" : nullptr;
      if (which == nullptr) continue;
      output_closed_ = true;
      if (signal_ == 0) signal_ = SIGPIPE;
      std::fprintf(stderr, "gpuxfer launch: its standard %s is closed; stopping the ranks\n", which);
      stop_others();
      return;
    }
  }

  // Waits (at most 50 ms) for output, an exit or a signal; moves the output into its lines.
  void pump_output() {
    std::vector<pollfd> fds{{exits_.get(), POLLIN, 0}};
    std::vector<std::pair<UniqueFd*, RankOutput*>> sources;
    for (Rank& rank : ranks_) {
      if (rank.out) sources.emplace_back(&rank.out, &rank.out_lines);
      if (rank.err) sources.emplace_back(&rank.err, &rank.err_lines);
    }
    for (const auto& source : sources) fds.push_back({source.first->get(), POLLIN, 0});
    if (poll(fds.data(), fds.size(), 50) <= 0) return;
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) drain(*sources[i - 1].first, *sources[i - 1].second);
    }
  }

  // The exit the kernel reported first, then the others, one at a time, until none is left: the first
  // failure is the one that happened first, not the lowest rank among those that exited since the last pass.
  void reap() {
    int status = 0;
    while (true) {
      signalfd_siginfo info{};
      if (read(exits_.get(), &info, sizeof(info)) == sizeof(info)) {
        // While one SIGCHLD is pending the kernel drops the later ones: this is the first exit since the
        // last read.
        const auto pid = static_cast<pid_t>(info.ssi_pid);
        if (waitpid(pid, &status, WNOHANG) == pid) exited(pid, status);
        continue;
      }
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid > 0) {
        exited(pid, status);
        continue;
      }
      if (pid < 0 && errno == ECHILD) lost();
      return;
    }
  }

  void exited(pid_t pid, int status) {
    for (Rank& rank : ranks_) {
      if (rank.pid != pid || !rank.running) continue;
      rank.running = false;
      const int code = exit_code(status);
      rank.code = code;
      if (code != 0) failed(rank, code);
    }
  }

  // Ranks something else reaped, their exit statuses lost: each counts as a failure.
  void lost() {
    for (Rank& rank : ranks_) {
      if (!rank.running) continue;
      rank.running = false;
      std::fprintf(stderr, "gpuxfer launch: rank %d is gone, its exit status lost\n", rank.index);
      failed(rank, 1);
    }
  }

  // The first failure stops the others and gives its code; every later one is named too.
  void failed(const Rank& rank, int code) {
    if (first_failure_ || stop_at_) {
      std::fprintf(stderr, "gpuxfer launch: rank %d exited with code %d\n", rank.index, code);
      return;
    }
    first_failure_ = code;
    std::fprintf(stderr, "gpuxfer launch: rank %d exited with code %d; stopping the other ranks\n",
                 rank.index, code);
    stop_others();
  }

  std::vector<Rank>& ranks_;
  std::chrono::milliseconds grace_;
  const UniqueFd& exits_;
  std::optional<int> first_failure_;
  std::optional<Clock::time_point> stop_at_;
  double timeout_seconds_;
  std::optional<Clock::time_point> timeout_at_;
  bool timed_out_ = false;
  bool killed_ = false;
  bool output_closed_ = false;
  int signal_ = 0;  // passed on, or SIGPIPE: the code is 128 + it without a failure
};

}  // namespace

int run_launch(const LaunchArgs& args) {
  std::vector<std::string> command = args.command;
  if (!command.empty() && command.front() == "--") command.erase(command.begin());
  if (command.empty())
    throw Error(Errc::invalid_option,
                "launch: no program given: gpuxfer launch -n N -- program args...");
  if (args.ranks_given && args.ranks < 1) {
    throw Error(Errc::invalid_option,
                "launch -n " + std::to_string(args.ranks) + ": at least 1 process");
  }
  if (!(args.grace_seconds >= 0 && args.grace_seconds <= max_grace_seconds)) {
    char given[32];
    std::snprintf(given, sizeof(given), "%g", args.grace_seconds);
    throw Error(Errc::invalid_option, std::string("launch --grace ") + given + ": 0 to " +
                                          std::to_string(static_cast<int>(max_grace_seconds)) +
                                          " seconds (a day)");
  }

  // The ranks' exits come from a signalfd, which tells which came first. SIGCHLD is blocked before the
  // first thread (CUDA's) starts, or a thread that does not block it would take and drop it; a SIG_IGN
  // inherited from whoever started us would have the kernel reap the ranks, their exit codes lost.
  // SIGPIPE is blocked (not ignored: the ranks get our mask as it was, and SIG_IGN would pass on to them),
  // so that a reader of our output that goes away is EPIPE, and we stop the ranks.
  std::signal(SIGCHLD, SIG_DFL);
  sigset_t child_exits;
  sigemptyset(&child_exits);
  sigaddset(&child_exits, SIGCHLD);
  sigset_t blocked = child_exits;
  sigaddset(&blocked, SIGPIPE);
  sigset_t entry_mask;
  pthread_sigmask(SIG_BLOCK, &blocked, &entry_mask);
  const UniqueFd exits(signalfd(-1, &child_exits, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!exits)
    throw Error(Errc::invalid_argument,
                std::string("launch: signalfd failed: ") + std::strerror(errno));

  if (args.timeout_given && !(args.timeout_seconds > 0 && args.timeout_seconds <= max_timeout_seconds)) {
    char given[32];
    std::snprintf(given, sizeof(given), "%g", args.timeout_seconds);
    throw Error(Errc::invalid_option, std::string("gpuxfer launch: --timeout ") + given +
                                          ": more than 0 and at most " +
                                          std::to_string(static_cast<int>(max_timeout_seconds)) + " seconds");
  }

  Job job;
  job.world = args.ranks_given ? args.ranks : visible_gpus();
  // Listening from here to rank 0's rendezvous, which takes this very socket: the port is never free for
  // another process to take (a port picked free and closed again would be, until rank 0 listens). Above
  // 0 to 2, which the ranks' standard streams take in the child.
  UniqueFd listener = detail::tcp_listen("127.0.0.1", 0, 1024);
  job.port = detail::bound_port(listener);
  if (job.world > 1) {
    job.listener = UniqueFd(fcntl(listener.get(), F_DUPFD_CLOEXEC, 3));
    if (!job.listener)
      throw Error(Errc::invalid_argument,
                  std::string("gpuxfer launch: fcntl failed: ") + std::strerror(errno));
  }
  listener = UniqueFd();
  job.id =
      "launch:" + detail::local_host_name() + ":" + std::to_string(getpid()) + ":" + std::to_string(job.port);
  job.node_per_rank = args.node_per_rank;
  if (detail::authentication_available()) job.secret = detail::new_secret_hex();

  // A signal ignored when we start (nohup, a shell's trap "" or `&`) stays ignored, for us and the ranks,
  // and is not passed on.
  struct sigaction action {};
  action.sa_handler = remember_signal;
  sigemptyset(&action.sa_mask);
  for (const int signal : forwarded_signals) {
    struct sigaction entry {};
    if (sigaction(signal, nullptr, &entry) == 0 && entry.sa_handler == SIG_IGN) continue;
    sigaction(signal, &action, nullptr);
  }

  std::vector<Rank> ranks;
  ranks.reserve(static_cast<std::size_t>(job.world));
  for (int i = 0; i < job.world; ++i) ranks.emplace_back(i);
  try {
    for (Rank& rank : ranks) {
      start(rank, job, command, entry_mask);
      job.listener = UniqueFd();  // rank 0 has it: the port is free again once rank 0 is done with it
    }
  } catch (...) {
    signal_all(ranks, SIGKILL);
    for (Rank& rank : ranks) {
      if (rank.running) waitpid(rank.pid, nullptr, 0);
    }
    throw;
  }
  const auto grace = std::chrono::milliseconds(static_cast<long long>(args.grace_seconds * 1000));
  return Supervisor(ranks, grace, exits, args.timeout_given ? args.timeout_seconds : 0).run();
}

}  // namespace gpuxfer::cli
