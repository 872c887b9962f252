// TCP sockets for the rendezvous: an owning file descriptor, listen and connect with clear errors, and
// sends and receives bounded by a Deadline (poll(), non-blocking descriptors).
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "comm/deadline.hpp"

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

/// A non-blocking socket listening on @p host:@p port (port 0: any free one); with @p every_interface, on
/// @p port of every interface of the family @p host resolves to (IPv6: IPv4 too), @p host resolved all the
/// same (the look-up given up at @p deadline; none by default).
/// @throws Error(Errc::comm_error) naming host:port, saying so when the port is already in use
[[nodiscard]] UniqueFd tcp_listen(const std::string& host, int port, int backlog,
                                  bool every_interface = false,
                                  const Deadline& deadline = Deadline(std::chrono::milliseconds::max()));

/// The port a listening socket is bound to.
[[nodiscard]] int bound_port(const UniqueFd& socket);

/// A port that was free on @p host a moment ago (bound to port 0 and closed again): for a launcher
/// that hands it to the rank that will listen on it.
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
