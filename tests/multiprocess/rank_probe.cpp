// A small program for `gpuxfer launch`'s tests, one mode per argument:
//   print               prints its rank variables, CUDA_VISIBLE_DEVICES, GPUXFER_NODE_ID and GPUXFER_JOB_ID,
//   one line on
//                       stdout, one on stderr
//   rendezvous          runs the rendezvous its environment names; rank 0's blob says its pid; prints it
//   fail R CODE         rank R exits with CODE after 200 ms; the others wait (at most 30 s) for a signal
//   stubborn R CODE     as fail, but the others ignore SIGTERM (the launcher must SIGKILL them)
//   wait                waits (at most 30 s) for a signal and says which one came
//   fds                 prints the file descriptors it has open, "fds 0 1 2 ...", in increasing order
//                       (GPUXFER_LISTEN_FD's apart: "listen fd N is a listening socket", when set)
//   squat PROGRAM...    tries to listen on GPUXFER_INIT's port on 127.0.0.1, as a process racing rank 0 for
//                       it would, says whether it got it, then runs PROGRAM (holding the port if it got it)
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gpuxfer/error.hpp>

#include "bootstrap/launch_env.hpp"
#include "bootstrap/rendezvous.hpp"

namespace {

volatile std::sig_atomic_t received = 0;
extern "C" void on_signal(int signal) { received = signal; }

std::string var(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "<unset>";
}

int wait_for_signal() {
  for (int i = 0; i < 3000 && received == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (received == 0) return 3;
  std::printf("got signal %d\n", static_cast<int>(received));
  return 128 + received;
}

int fail_one(int argc, char** argv, bool stubborn) {
  if (argc < 4) return 2;
  const int rank = std::atoi(std::getenv("GPUXFER_RANK"));
  if (rank == std::atoi(argv[2])) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::printf("failing with %d\n", std::atoi(argv[3]));
    return std::atoi(argv[3]);
  }
  if (stubborn) {
    std::signal(SIGTERM, SIG_IGN);
    std::printf("ignoring SIGTERM\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return 4;
  }
  return wait_for_signal();
}

// Every descriptor but the one that reads /proc/self/fd and GPUXFER_LISTEN_FD's, which gets a line of its
// own.
int print_fds() {
  const char* listen_fd = std::getenv("GPUXFER_LISTEN_FD");
  const int listening = listen_fd != nullptr ? std::atoi(listen_fd) : -1;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 2;
  std::vector<int> fds;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd != dirfd(dir) && fd != listening) fds.push_back(fd);
  }
  closedir(dir);
  std::sort(fds.begin(), fds.end());
  std::string line = "fds";
  for (const int fd : fds) {
    line += ' ';  // piece by piece: " " + std::to_string trips g++ 12's -Wrestrict false positive at -O3
    line += std::to_string(fd);
  }
  std::printf("%s\n", line.c_str());
  if (listening >= 0) {
    int accepting = 0;
    socklen_t length = sizeof(accepting);
    const bool is_listener =
        getsockopt(listening, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0 && accepting != 0;
    std::printf("listen fd %d is %s\n", listening,
                is_listener ? "a listening socket" : "not a listening socket");
  }
  return 0;
}

int squat(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string init = var("GPUXFER_INIT");
  const int port = std::atoi(init.c_str() + init.rfind(':') + 1);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);  // kept across exec: the program holds the port on
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 && listen(fd, 8) == 0) {
    std::printf("squat: got the port\n");
  } else {
    std::printf("squat: the port is taken (%s)\n", std::strerror(errno));
  }
  std::fflush(stdout);
  execv(argv[2], argv + 2);
  return 127;
}

}  // namespace

int main(int argc, char** argv) try {
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "print") {
    std::printf("rank=%s local=%s world=%s init=%s cuda=%s node=%s job=%s\n", var("GPUXFER_RANK").c_str(),
                var("GPUXFER_LOCAL_RANK").c_str(), var("GPUXFER_WORLD_SIZE").c_str(),
                var("GPUXFER_INIT").c_str(), var("CUDA_VISIBLE_DEVICES").c_str(),
                var("GPUXFER_NODE_ID").c_str(), var("GPUXFER_JOB_ID").c_str());
    std::fprintf(stderr, "to stderr from %s\n", var("GPUXFER_RANK").c_str());
    std::printf("no newline at the end");
    return 0;
  }
  if (mode == "rendezvous") {
    const auto env = gpuxfer::detail::launch_env_from_process();
    const std::string blob =
        gpuxfer::detail::exchange_blob(env, "blob of rank 0, pid " + std::to_string(getpid()));
    std::printf("rank %d of %d got '%s'\n", env.rank, env.world_size, blob.c_str());
    if (!env.secret.empty())
      std::printf("rank %d has a secret of %zu bits\n", env.rank, env.secret.size() * 8);
    return 0;
  }
  if (mode == "fail") return fail_one(argc, argv, false);
  if (mode == "stubborn") return fail_one(argc, argv, true);
  if (mode == "fds") return print_fds();
  if (mode == "squat") return squat(argc, argv);
  if (mode == "wait") {
    std::printf("waiting\n");
    std::fflush(stdout);
    return wait_for_signal();
  }
  std::fprintf(stderr, "rank_probe: unknown mode '%s'\n", mode.c_str());
  return 2;
} catch (const gpuxfer::Error& e) {
  std::fprintf(stderr, "rank_probe: %s\n", e.what());
  return 1;
}
