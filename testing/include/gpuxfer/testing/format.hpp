/// @file format.hpp
/// @brief The text formatting the command and the bench print with: sizes, fixed-point numbers, versions.
#pragma once

#include <cstddef>
#include <cstdio>
#include <iterator>
#include <string>

namespace gpuxfer::testing {

/// @p value with @p digits decimals ("12.34" for 12.3449 and 2).
inline std::string format_fixed(double value, int digits) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

/// "64 MiB", "1.5 GiB", "4095 B": binary units, at most one decimal.
inline std::string format_bytes(std::size_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  const bool whole = value == static_cast<double>(static_cast<std::size_t>(value));
  return format_fixed(value, whole ? 0 : 1) + " " + units[unit];
}

/// NCCL's version code (22809) as "2.28.9"; "none" for 0.
inline std::string nccl_version_string(int code) {
  if (code <= 0) {
    return "none";
  }
  // Since NCCL 2.9 the code is major*10000 + minor*100 + patch; before, major*1000 + minor*100 + patch.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

}  // namespace gpuxfer::testing
