#include "bootstrap/init_address.hpp"

#include <charconv>
#include <string>

#include <gpuxfer/error.hpp>

namespace gpuxfer::detail {
namespace {

[[noreturn]] void bad(std::string_view variable, std::string_view text, const std::string& why) {
  throw Error(Errc::invalid_option, std::string(variable) + "='" + std::string(text) + "': " + why);
}

int parse_port(std::string_view port, std::string_view variable, std::string_view text) {
  int value = 0;
  const auto* end = port.data() + port.size();
  const auto [ptr, ec] = std::from_chars(port.data(), end, value);
  if (port.empty() || ec != std::errc{} || ptr != end || value < 1 || value > 65535) {
    bad(variable, text, "the port must be a number from 1 to 65535");
  }
  return value;
}

}  // namespace

std::string InitAddress::to_string() const {
  switch (kind) {
    case Kind::tcp:
      return "tcp://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
             std::to_string(port);
    case Kind::file:
      return "file://" + path;
    case Kind::none:
      break;
  }
  return "none";
}

InitAddress parse_init_address(std::string_view text, std::string_view variable) {
  constexpr std::string_view tcp = "tcp://";
  constexpr std::string_view file = "file://";
  InitAddress address;
  if (text.starts_with(file)) {
    address.kind = InitAddress::Kind::file;
    address.path = std::string(text.substr(file.size()));
    if (address.path.empty() || address.path.front() != '/' || address.path.back() == '/') {
      bad(variable, text, "expected file:///absolute/path/to/a/file (three slashes)");
    }
    return address;
  }
  if (!text.starts_with(tcp)) bad(variable, text, "expected tcp://host:port or file:///path");
  std::string_view rest = text.substr(tcp.size());
  std::string_view host;
  std::string_view port;
  if (rest.starts_with('[')) {  // [IPv6]:port
    const auto close = rest.find(']');
    if (close == std::string_view::npos || rest.substr(close + 1, 1) != ":") {
      bad(variable, text, "expected tcp://[ipv6]:port");
    }
    host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos)
      bad(variable, text, "expected tcp://host:port (the port is missing)");
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty()) bad(variable, text, "the host is empty");
  address.kind = InitAddress::Kind::tcp;
  address.host = std::string(host);
  address.port = parse_port(port, variable, text);
  return address;
}

InitAddress tcp_address(std::string_view host, std::string_view port, std::string_view port_variable) {
  InitAddress address;
  address.kind = InitAddress::Kind::tcp;
  address.host = std::string(host);
  address.port = parse_port(port, port_variable, port);
  return address;
}

}  // namespace gpuxfer::detail
