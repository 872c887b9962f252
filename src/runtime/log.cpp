#include "runtime/log.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

namespace gpuxfer::detail {
namespace {

LogLevel level_from_env() noexcept {
  const char* value = std::getenv("GPUXFER_LOG_LEVEL");
  if (value == nullptr) return LogLevel::warn;
  if (const auto level = parse_log_level(value)) return *level;
  std::fprintf(stderr,
               "gpuxfer WARN: GPUXFER_LOG_LEVEL='%s' is not error, warn, info or debug: warn is used\n",
               value);
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

std::optional<LogLevel> parse_log_level(std::string_view text) noexcept {
  std::string lower(text.size(), '\0');
  std::transform(text.begin(), text.end(), lower.begin(),
                 [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); });
  if (lower == "error") return LogLevel::error;
  if (lower == "warn" || lower == "warning") return LogLevel::warn;
  if (lower == "info") return LogLevel::info;
  if (lower == "debug") return LogLevel::debug;
  return std::nullopt;
}

bool log_enabled(LogLevel level) noexcept {
  static const LogLevel threshold = level_from_env();
  return static_cast<int>(level) <= static_cast<int>(threshold);
}

void log(LogLevel level, const std::string& message) noexcept {
  std::fprintf(stderr, "gpuxfer %s: %s\n", name(level), message.c_str());
}

}  // namespace gpuxfer::detail
