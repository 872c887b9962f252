/// @file fork_ranks.hpp
/// @brief Runs the ranks of a job as forked children of the test, each reporting what it got (or the
///        gpuxfer::Error it threw) through a pipe; bounded: children still running at the limit are killed.
#pragma once

#include <chrono>
#include <csignal>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gpuxfer/error.hpp>

namespace gpuxfer::test {

/// What one child reported.
struct RankOutcome {
  bool ok = false;      ///< the body returned
  std::string code;     ///< the Errc name when it threw a gpuxfer::Error, "exception" for another one
  std::string text;     ///< what the body returned, or the error's what()
  bool killed = false;  ///< still running at the limit
};

/// Forks one child per body and returns their outcomes in order. A child never returns into the test: it
/// writes its outcome and _exits. @p start_delay[i] (if given) delays body i's start.
inline std::vector<RankOutcome> run_forked(const std::vector<std::function<std::string()>>& bodies,
                                           std::chrono::seconds limit = std::chrono::seconds(20),
                                           const std::vector<std::chrono::milliseconds>& start_delay = {}) {
  std::vector<pid_t> pids;
  std::vector<int> reads;
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    int fds[2];
    if (pipe(fds) != 0) return {};
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      if (i < start_delay.size()) std::this_thread::sleep_for(start_delay[i]);
      std::string report;
      try {
        report = "ok\n" + bodies[i]();
      } catch (const Error& e) {
        report = std::string(to_string(e.code())) + "\n" + e.what();
      } catch (const std::exception& e) {
        report = std::string("exception\n") + e.what();
      }
      std::size_t done = 0;
      while (done < report.size()) {
        const ssize_t n = write(fds[1], report.data() + done, report.size() - done);
        if (n <= 0) break;
        done += static_cast<std::size_t>(n);
      }
      _exit(0);
    }
    close(fds[1]);
    pids.push_back(pid);
    reads.push_back(fds[0]);
  }
  std::vector<std::string> reports(bodies.size());
  std::vector<bool> open(bodies.size(), true);
  const auto end = std::chrono::steady_clock::now() + limit;
  std::size_t still_open = bodies.size();
  while (still_open > 0 && std::chrono::steady_clock::now() < end) {
    std::vector<pollfd> fds;
    for (std::size_t i = 0; i < reads.size(); ++i) fds.push_back({open[i] ? reads[i] : -1, POLLIN, 0});
    if (poll(fds.data(), fds.size(), 100) <= 0) continue;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!open[i] || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(reads[i], buffer, sizeof(buffer));
      if (n > 0) {
        reports[i].append(buffer, static_cast<std::size_t>(n));
      } else {
        open[i] = false;
        --still_open;
      }
    }
  }
  std::vector<RankOutcome> outcomes(bodies.size());
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    if (open[i]) {
      kill(pids[i], SIGKILL);
      outcomes[i].killed = true;
    }
    waitpid(pids[i], nullptr, 0);
    close(reads[i]);
    const auto newline = reports[i].find('\n');
    if (newline == std::string::npos) continue;
    outcomes[i].code = reports[i].substr(0, newline);
    outcomes[i].ok = outcomes[i].code == "ok";
    outcomes[i].text = reports[i].substr(newline + 1);
  }
  return outcomes;
}

/// "ok: <text>" or "<code>: <what>", for failure messages.
inline std::string describe(const RankOutcome& outcome) {
  if (outcome.killed) return "killed at the time limit (it hung)";
  return outcome.code + ": " + outcome.text;
}

}  // namespace gpuxfer::test
