/// @file paths.hpp
/// @brief Every path of each operation family, and its name in test names and messages.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <tuple>
#include <utility>

#include <gtest/gtest.h>

#include <gpuxfer/inter_gpu_transfer.hpp>

namespace gpuxfer::test {
namespace detail {

template <class Path, std::size_t N>
using PathNames = std::array<std::pair<Path, const char*>, N>;

template <class Path, std::size_t N>
constexpr std::array<Path, N> paths_of(const PathNames<Path, N>& names) {
  std::array<Path, N> paths{};
  for (std::size_t i = 0; i < N; ++i) paths[i] = names[i].first;
  return paths;
}

template <class Path, std::size_t N>
std::string name_of(const PathNames<Path, N>& names, Path path) {
  for (const auto& [p, name] : names) {
    if (p == path) return name;
  }
  return "unknown";
}

inline constexpr PathNames<CopyPath, 3> kCopy{
    {{CopyPath::automatic, "automatic"}, {CopyPath::peer, "peer"}, {CopyPath::staged, "staged"}}};
inline constexpr PathNames<HostBroadcastPath, 3> kHostBroadcast{{{HostBroadcastPath::automatic, "automatic"},
                                                                 {HostBroadcastPath::per_device, "per_device"},
                                                                 {HostBroadcastPath::scatter_allgather,
                                                                  "scatter_allgather"}}};
inline constexpr PathNames<DeviceBroadcastPath, 3> kDeviceBroadcast{{{DeviceBroadcastPath::automatic, "automatic"},
                                                                     {DeviceBroadcastPath::nccl, "nccl"},
                                                                     {DeviceBroadcastPath::peer, "peer"}}};

}  // namespace detail

inline constexpr auto kCopyPaths = detail::paths_of(detail::kCopy);
inline constexpr auto kHostBroadcastPaths = detail::paths_of(detail::kHostBroadcast);
inline constexpr auto kDeviceBroadcastPaths = detail::paths_of(detail::kDeviceBroadcast);

inline std::string path_name(CopyPath path) { return detail::name_of(detail::kCopy, path); }
inline std::string path_name(HostBroadcastPath path) { return detail::name_of(detail::kHostBroadcast, path); }
inline std::string path_name(DeviceBroadcastPath path) { return detail::name_of(detail::kDeviceBroadcast, path); }

/// Names a test parameterised by (path, size) "peer_4095".
template <class Path>
std::string path_size_name(const ::testing::TestParamInfo<std::tuple<Path, std::size_t>>& info) {
  return path_name(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param));
}

}  // namespace gpuxfer::test
