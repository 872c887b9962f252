#include "bootstrap/socket.hpp"

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gpuxfer/error.hpp>

#include "runtime/log.hpp"

namespace gpuxfer::detail {
namespace {

[[noreturn]] void comm_fail(const std::string& message) { throw Error(Errc::comm_error, message); }

std::string endpoint(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

struct AddrInfoFree {
  void operator()(addrinfo* info) const noexcept { freeaddrinfo(info); }
};
using AddrInfo = std::unique_ptr<addrinfo, AddrInfoFree>;

// getaddrinfo's addresses for @p host, or none and its error status (answered: false when the resolver
// gave no answer in time).
struct Resolved {
  AddrInfo found;
  int status = 0;
  bool answered = true;
};

// @p numeric_only: AI_NUMERICHOST, no resolver asked (a name fails at once).
Resolved look_up(const std::string& host, int port, bool passive, bool numeric_only = false) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0) | (numeric_only ? AI_NUMERICHOST : 0);
  addrinfo* found = nullptr;
  const int status = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  return {AddrInfo(status == 0 ? found : nullptr), status};
}

// look_up, given up at @p deadline: a resolver that does not answer (a DNS server down, which glibc asks
// for 5 s, twice, before the next) cannot hold a rank past its timeout. A numeric address asks no resolver:
// read at once, on this thread.
Resolved look_up_within(const std::string& host, int port, bool passive, const Deadline& deadline) {
  if (Resolved numeric = look_up(host, port, passive, true); numeric.status == 0) return numeric;
  std::optional<Resolved> resolved =
      call_within(deadline, [host, port, passive] { return look_up(host, port, passive); });
  if (!resolved) return {AddrInfo(), EAI_AGAIN, false};
  return std::move(*resolved);
}

std::string cannot_resolve(const std::string& host, const Resolved& resolved) {
  return "cannot resolve the rendezvous host '" + host + "' (" +
         (resolved.answered ? gai_strerror(resolved.status) : "the resolver gave no answer") + ")";
}

UniqueFd open_socket(const addrinfo& info) {
  return UniqueFd(socket(info.ai_family, info.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, info.ai_protocol));
}

// One connection attempt, waiting at most until the deadline (and 1 s). Returns 0 or the errno.
int try_connect(const UniqueFd& fd, const addrinfo& info, const Deadline& deadline) {
  if (connect(fd.get(), info.ai_addr, info.ai_addrlen) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  pollfd waiter{fd.get(), POLLOUT, 0};
  const int ready = poll(&waiter, 1, deadline.poll_ms());
  if (ready <= 0) return ready == 0 ? ETIMEDOUT : errno;
  int error = 0;
  socklen_t length = sizeof(error);
  if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) return errno;
  return error;
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

int UniqueFd::release() noexcept {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

UniqueFd tcp_listen(const std::string& host, int port, int backlog, const Deadline& deadline) {
  const Resolved resolved = look_up_within(host, port, true, deadline);
  if (resolved.status != 0) {
    comm_fail(cannot_resolve(host, resolved) + (resolved.answered ? "" : " within " + deadline.describe()) +
              ": check GPUXFER_INIT or MASTER_ADDR");
  }
  const AddrInfo& found = resolved.found;
  int last_error = 0;
  for (const addrinfo* info = found.get(); info != nullptr; info = info->ai_next) {
    UniqueFd fd = open_socket(*info);
    if (!fd) {
      last_error = errno;
      continue;
    }
    const int on = 1;  // a port still in TIME_WAIT from the last job is free to listen on again
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (info->ai_family == AF_INET6 &&
        IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(info->ai_addr)->sin6_addr)) {
      const int off = 0;  // "::", every interface: IPv4 clients too
      setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    }
    if (bind(fd.get(), info->ai_addr, info->ai_addrlen) == 0 && listen(fd.get(), backlog) == 0) return fd;
    last_error = errno;
  }
  if (last_error == EADDRINUSE) {
    comm_fail("rank 0 cannot listen on " + endpoint(host, port) +
              ": the port is already in use (another job, or a process still holding it): choose another "
              "port in GPUXFER_INIT (or MASTER_PORT, whose next port gpuxfer takes)");
  }
  comm_fail("rank 0 cannot listen on " + endpoint(host, port) + " (" + std::strerror(last_error) +
            "): GPUXFER_INIT or MASTER_ADDR must name an address of rank 0's own host");
}

int bound_port(const UniqueFd& socket) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(socket.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    comm_fail(std::string("getsockname failed: ") + std::strerror(errno));
  }
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
}

int pick_free_port(const std::string& host) { return bound_port(tcp_listen(host, 0, 1)); }

UniqueFd adopt_listener(int fd, int port, int backlog, const std::string& variable) {
  const std::string given = variable + "=" + std::to_string(fd);
  const std::string unset =
      ": it is set by gpuxfer launch, for its rank 0 alone; a program that starts "
      "rank 0 otherwise must unset it";
  int accepting = 0;
  socklen_t length = sizeof(accepting);
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) != 0) {
    comm_fail(given + " is not a listening socket (" + std::strerror(errno) + ")" + unset);
  }
  if (accepting == 0) comm_fail(given + " is a socket that does not listen" + unset);
  sockaddr_storage address{};
  length = sizeof(address);
  int bound = -1;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    if (address.ss_family == AF_INET6)
      bound = ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
    if (address.ss_family == AF_INET) bound = ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
  }
  if (bound != port) {
    comm_fail(given + " listens on port " + std::to_string(bound) + ", not on the rendezvous's port " +
              std::to_string(port) + unset);
  }
  UniqueFd socket(fd);
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 ||
      listen(fd, backlog) != 0) {
    comm_fail(given + ": cannot take the socket (" + std::string(std::strerror(errno)) + ")");
  }
  return socket;
}

bool bound_to_loopback(const UniqueFd& socket) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(socket.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) return false;
  if (address.ss_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&address)->sin_addr.s_addr) >> 24) == 127;
  }
  return address.ss_family == AF_INET6 &&
         IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&address)->sin6_addr);
}

bool is_numeric_address(const std::string& host) { return look_up(host, 0, true, true).status == 0; }

UniqueFd tcp_connect(const std::string& host, int port, const Deadline& deadline, const std::string& who) {
  int last_error = 0;
  std::optional<Resolved> unresolved;  // the last answer, while the name does not resolve
  bool answered = false;               // whether the resolver has answered a look-up yet
  do {
    // A name that does not resolve may yet (a cluster's DNS can learn rank 0's name after the others
    // start): tried again until the deadline, as an address nobody listens on. A look-up cut short by the
    // deadline (the last try) says nothing new when an earlier one was answered.
    Resolved resolved = look_up_within(host, port, false, deadline);
    if (resolved.answered || !answered) {
      if (resolved.status != 0 && !unresolved && !deadline.expired()) {
        GPUXFER_LOG(warn, who + ": " + cannot_resolve(host, resolved) + ": trying again for up to " +
                              deadline.describe());
      }
      if (resolved.status != 0) {
        unresolved = Resolved{AddrInfo(), resolved.status, resolved.answered};
      } else {
        unresolved.reset();
      }
    }
    answered = answered || resolved.answered;
    for (const addrinfo* info = resolved.found.get(); info != nullptr; info = info->ai_next) {
      UniqueFd fd = open_socket(*info);
      if (!fd) {
        last_error = errno;
        continue;
      }
      last_error = try_connect(fd, *info, deadline);
      if (last_error == 0) return fd;
    }
    // Nobody listens yet (rank 0 starts later) or the network is not up: try again shortly; a name
    // that does not resolve, after a second (each try asks the resolver, perhaps a cluster's DNS).
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::min(unresolved ? 1000 : 50, deadline.poll_ms())));
  } while (!deadline.expired());
  if (unresolved) {
    comm_fail(who + " " + cannot_resolve(host, *unresolved) + " within " + deadline.describe() +
              ": check GPUXFER_INIT or MASTER_ADDR, and that this host's resolver knows rank 0's host");
  }
  comm_fail(who + " could not reach rank 0 at " + endpoint(host, port) + " within " + deadline.describe() +
            " (last error: " + std::strerror(last_error) +
            "): check that rank 0 runs, that GPUXFER_INIT or MASTER_ADDR/MASTER_PORT name its host and port, "
            "that no firewall is in the way, and that " +
            who + " is not started twice (rank 0 stops listening once every rank has joined)");
}

bool send_all(const UniqueFd& socket, std::span<const std::byte> bytes, const Deadline& deadline) {
  while (!bytes.empty()) {
    const ssize_t sent = send(socket.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent > 0) {
      bytes = bytes.subspan(static_cast<std::size_t>(sent));
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd waiter{socket.get(), POLLOUT, 0};
      if (poll(&waiter, 1, deadline.poll_ms()) <= 0 && deadline.expired()) return false;
      continue;
    }
    return false;
  }
  return true;
}

ReadResult read_some(const UniqueFd& socket, std::string& buffer, std::size_t limit) {
  char chunk[4096];
  while (buffer.size() < limit) {
    const ssize_t got = recv(socket.get(), chunk, std::min(sizeof(chunk), limit - buffer.size()), 0);
    if (got > 0) {
      buffer.append(chunk, static_cast<std::size_t>(got));
      continue;
    }
    if (got == 0) return ReadResult::closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return ReadResult::would_block;
    return ReadResult::closed;  // reset by the peer: gone all the same
  }
  return ReadResult::data;
}

bool wait_readable(const UniqueFd& socket, const Deadline& deadline) {
  while (true) {
    pollfd waiter{socket.get(), POLLIN, 0};
    const int ready = poll(&waiter, 1, deadline.poll_ms());
    if (ready > 0) return true;
    if (deadline.expired()) return false;
  }
}

}  // namespace gpuxfer::detail
