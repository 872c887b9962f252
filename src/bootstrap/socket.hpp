// TCP sockets for the rendezvous: an owning file descriptor, listen and connect with clear errors, and
// sends and receives bounded by a Deadline (poll(), non-blocking descriptors).
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "bootstrap/deadline.hpp"

namespace gpuxfer::detail {

/// Owns a file descriptor: move-only, closed when destroyed.
class UniqueFd {
 public:
  UniqueFd() noexcept = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept;

 private:
  int fd_ = -1;
};

/// A non-blocking socket listening on @p host:@p port (port 0: any free one), on @p host's address alone;
/// 0.0.0.0 is every IPv4 interface, :: every interface (IPv4 too). The look-up of a name is given up at
/// @p deadline (none by default).
/// @throws Error(Errc::comm_error) naming host:port, saying so when the port is already in use
[[nodiscard]] UniqueFd tcp_listen(const std::string& host, int port, int backlog,
                                  const Deadline& deadline = Deadline(std::chrono::milliseconds::max()));

/// Takes @p fd, a TCP socket listening on @p port that this process was handed (GPUXFER_LISTEN_FD, which
/// @p variable names): made non-blocking and close-on-exec, its backlog raised to @p backlog.
/// @throws Error(Errc::comm_error) naming @p variable when @p fd is not such a socket (it is then left
///         alone, not closed)
[[nodiscard]] UniqueFd adopt_listener(int fd, int port, int backlog, const std::string& variable);

/// Whether @p socket is bound to a loopback address (127.0.0.0/8, ::1).
[[nodiscard]] bool bound_to_loopback(const UniqueFd& socket);

/// Whether @p host is a numeric IPv4 or IPv6 address, not a name.
[[nodiscard]] bool is_numeric_address(const std::string& host);

/// The port a listening socket is bound to.
[[nodiscard]] int bound_port(const UniqueFd& socket);

/// A port that was free on @p host a moment ago (bound to port 0 and closed again): for tests. A launcher
/// hands the listening socket itself to the rank that serves on it instead (no window for another process).
[[nodiscard]] int pick_free_port(const std::string& host);

/// Connects to @p host:@p port, retrying while nobody listens there yet or @p host does not resolve, until
/// @p deadline.
/// @p who says who connects, for the messages ("rank 3").
/// @throws Error(Errc::comm_error) naming host:port, the timeout and the last error
[[nodiscard]] UniqueFd tcp_connect(const std::string& host, int port, const Deadline& deadline,
                                   const std::string& who);

/// Sends every byte before @p deadline (MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE).
/// Returns false when the peer is gone or the deadline passed.
[[nodiscard]] bool send_all(const UniqueFd& socket, std::span<const std::byte> bytes,
                            const Deadline& deadline);

/// What one read of a non-blocking socket gave.
enum class ReadResult { data, would_block, closed };

/// Appends what is there to @p buffer (at most @p limit bytes in all).
ReadResult read_some(const UniqueFd& socket, std::string& buffer, std::size_t limit);

/// Waits until @p socket is readable or @p deadline passes. Returns false on the deadline.
[[nodiscard]] bool wait_readable(const UniqueFd& socket, const Deadline& deadline);

}  // namespace gpuxfer::detail
