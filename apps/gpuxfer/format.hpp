/// @file format.hpp
/// @brief Small text helpers shared by the subcommands.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace gpuxfer::cli {

/// "64 MiB", "1.5 GiB", "4095 B": binary units, at most one decimal.
inline std::string format_bytes(std::size_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  const bool whole = value == static_cast<double>(static_cast<std::size_t>(value));
  std::snprintf(text, sizeof text, whole ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
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

}  // namespace gpuxfer::cli
