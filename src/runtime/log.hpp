// gpuxfer's logger: one line per message on stderr, switched by GPUXFER_LOG_LEVEL (error, warn, info,
// debug; default warn), read once.
#pragma once

#include <string>

namespace gpuxfer::detail {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

[[nodiscard]] bool log_enabled(LogLevel level) noexcept;
void log(LogLevel level, const std::string& message) noexcept;

}  // namespace gpuxfer::detail

#define GPUXFER_LOG(level, message)                                                        \
  do {                                                                                     \
    if (::gpuxfer::detail::log_enabled(::gpuxfer::detail::LogLevel::level)) {             \
      ::gpuxfer::detail::log(::gpuxfer::detail::LogLevel::level, (message));              \
    }                                                                                      \
  } while (0)
