// Where the ranks meet: GPUXFER_INIT's tcp://host:port or file:///path, or MASTER_ADDR/MASTER_PORT.
#pragma once

#include <string>
#include <string_view>

namespace gpuxfer::detail {

struct InitAddress {
  enum class Kind { none, tcp, file };
  Kind kind = Kind::none;  ///< none: a single process, nothing to meet over
  std::string host;        ///< tcp: a host name or a numeric address (IPv6 in brackets in the text)
  int port = 0;            ///< tcp: 1 to 65535
  std::string path;        ///< file: an absolute path every rank sees
  /// tcp: rank 0 listens on every interface (the wildcard address of host's family), as torch.distributed's
  /// store does, not on host's address alone: set for MASTER_ADDR, a host name that may resolve on rank 0's
  /// own host to a loopback address the other nodes cannot reach (Debian's 127.0.1.1 in /etc/hosts).
  bool every_interface = false;

  /// "tcp://host:port", "file:///path" or "none".
  [[nodiscard]] std::string to_string() const;
};

/// Parses tcp://host:port or file:///absolute/path. @p variable names the source in errors.
/// @throws Error(Errc::invalid_option) naming @p variable and @p text
[[nodiscard]] InitAddress parse_init_address(std::string_view text, std::string_view variable);

/// A TCP address from a host and a port text (MASTER_ADDR, MASTER_PORT).
/// @throws Error(Errc::invalid_option) naming @p port_variable when the port is not 1 to 65535
[[nodiscard]] InitAddress tcp_address(std::string_view host, std::string_view port,
                                      std::string_view port_variable);

}  // namespace gpuxfer::detail
