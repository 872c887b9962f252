#include "runtime/log.hpp"

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace gpuxfer::detail {
namespace {

LogLevel level_from_env() noexcept {
  const char* value = std::getenv("GPUXFER_LOG_LEVEL");
  if (value == nullptr) return LogLevel::warn;
  const std::string_view v(value);
  if (v == "error") return LogLevel::error;
  if (v == "info") return LogLevel::info;
  if (v == "debug") return LogLevel::debug;
  return LogLevel::warn;
}

const char* name(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::error: return "ERROR";
    case LogLevel::warn: return "WARN";
    case LogLevel::info: return "INFO";
    case LogLevel::debug: return "DEBUG";
  }
  return "?";
}

}  // namespace

bool log_enabled(LogLevel level) noexcept {
  static const LogLevel threshold = level_from_env();
  return static_cast<int>(level) <= static_cast<int>(threshold);
}

void log(LogLevel level, const std::string& message) noexcept {
  std::fprintf(stderr, "gpuxfer %s: %s\n", name(level), message.c_str());
}

}  // namespace gpuxfer::detail
