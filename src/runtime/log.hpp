// gpuxfer's logger: one line per message on stderr, switched by GPUXFER_LOG_LEVEL (error, warn, info,
// debug, in any case; default warn), read once. An unknown value is said once on stderr, and warn used.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpuxfer::detail {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

/// @p text as a level, in any case ("warning" for warn too); nullopt when it is none.
[[nodiscard]] std::optional<LogLevel> parse_log_level(std::string_view text) noexcept;

[[nodiscard]] bool log_enabled(LogLevel level) noexcept;
void log(LogLevel level, const std::string& message) noexcept;

}  // namespace gpuxfer::detail

#define GPUXFER_LOG(level, message)                                                        \
  do {                                                                                     \
    if (::gpuxfer::detail::log_enabled(::gpuxfer::detail::LogLevel::level)) {             \
      ::gpuxfer::detail::log(::gpuxfer::detail::LogLevel::level, (message));              \
    }                                                                                      \
  } while (0)
