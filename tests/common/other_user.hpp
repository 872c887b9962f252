/// @file other_user.hpp
/// @brief A second user for tests of what another user of the host can do: shell commands run as
///        nobody (uid and gid 65534, no groups) through util-linux's setpriv, from a test run as root.
#pragma once

#include <chrono>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace gpuxfer::test {

/// The uid that other_user_run runs as.
inline constexpr uid_t other_uid = 65534;

/// Runs @p command with `sh -c` as the other user, bounded at 10 s. Returns its exit status (0 for
/// success), or -1 when it could not be started.
inline int other_user_run(const std::string& command) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execlp("timeout", "timeout", "-s", "KILL", "10", "setpriv", "--reuid=65534", "--regid=65534",
           "--clear-groups", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Why the tests cannot act as another user here (for GTEST_SKIP), or empty when they can: not root,
/// no setpriv, or a switch that fails (a container without the capability). With @p folder, also
/// when the other user cannot create files in it (a TMPDIR it cannot reach).
inline std::string other_user_unavailable(const std::string& folder = {}) {
  if (geteuid() != 0) return "acting as a second user (setpriv) needs root";
  if (other_user_run("test \"$(id -u)\" = 65534") != 0) {
    return "setpriv --reuid=65534 --regid=65534 --clear-groups did not run (util-linux missing, or no "
           "permission to switch users)";
  }
  if (!folder.empty() && other_user_run("test -w '" + folder + "' && test -x '" + folder + "'") != 0) {
    return "uid 65534 cannot write in " + folder + " (a TMPDIR it cannot reach)";
  }
  return {};
}

}  // namespace gpuxfer::test
