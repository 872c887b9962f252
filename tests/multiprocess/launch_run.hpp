/// @file launch_run.hpp
/// @brief Runs `gpuxfer launch` through the shell for a test, bounded, and keeps its output and exit code.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include <sys/wait.h>

namespace gpuxfer::test {

struct LaunchRun {
  int code = -1;
  std::string output;  // stdout and stderr together
  std::chrono::steady_clock::duration took{};
};

/// Runs the shell command @p command, its stdout and stderr together, and waits for it; the caller bounds it.
inline LaunchRun run_shell(const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  LaunchRun run;
  FILE* pipe = popen(("(" + command + ") 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, got);
  const int status = pclose(pipe);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.took = std::chrono::steady_clock::now() - start;
  return run;
}

/// Runs @p arguments after `@p cli launch` through the shell, bounded by coreutils' timeout. @p prefix
/// goes before the command (variables, a wrapper).
inline LaunchRun launch(const std::string& cli, const std::string& arguments,
                        const std::string& prefix = "") {
  return run_shell(prefix + " timeout -s KILL 60 '" + cli + "' launch " + arguments);
}

inline bool has(const LaunchRun& run, const std::string& text) { return run.output.find(text) != std::string::npos; }

}  // namespace gpuxfer::test
