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
  /// tcp: the numeric address rank 0 listens on, when not host's (GPUXFER_LISTEN_ADDR): 0.0.0.0 or :: for
  /// every interface. Empty: host's address alone.
  std::string listen_host;

  /// tcp: where rank 0 listens: listen_host, else host.
  [[nodiscard]] const std::string& listen_at() const { return listen_host.empty() ? host : listen_host; }

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
