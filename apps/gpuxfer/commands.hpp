/// @file commands.hpp
/// @brief The subcommands of the `gpuxfer` tool, one function each; main.cpp parses and dispatches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gpuxfer/multi_gpu_manager.hpp>
#include <gpuxfer/options.hpp>

namespace gpuxfer::cli {

/// Exit code of `check` when the machine has no usable CUDA device.
inline constexpr int exit_no_device = 2;

/// A manager over whatever devices the environment selects (GPUXFER_* variables apply), possibly none:
/// the subcommands report "no device" themselves instead of failing in create().
inline std::shared_ptr<MultiGpuManager> open_manager() {
  Options options = Options::from_env();
  options.min_devices = 0;
  return MultiGpuManager::create(std::move(options));
}

/// Why there is no device, never empty.
inline std::string no_device_reason(const MultiGpuManager& manager) {
  return manager.device_status().empty() ? std::string("no device visible") : manager.device_status();
}

struct TopoArgs {
  bool json = false;  ///< print JSON instead of tables
};

struct CheckArgs {
  std::string size = "64MiB";  ///< bytes per device, as gpuxfer::parse_size reads it
  std::uint64_t seed = 1;      ///< run seed of the data patterns
};

struct ResourceSpecArgs {
  std::string output;  ///< file to write; empty means stdout
};

struct LaunchArgs {
  int ranks = 0;             ///< processes to start (-n)
  bool ranks_given = false;  ///< -n was given; else one per visible GPU
  double grace_seconds = 5;  ///< between SIGTERM and SIGKILL when the ranks are stopped
  /// --timeout: ranks still running this long after the start are named, with the exits so far, and
  /// stopped; the code is then 124.
  double timeout_seconds = 0;
  bool timeout_given = false;
  /// Each rank a node of its own (GPUXFER_NODE_ID=rank<i>): the host operations then take the path
  /// between nodes (NCCL) on one host.
  bool node_per_rank = false;
  std::vector<std::string> command;  ///< the program and its arguments (a leading "--" is dropped)
};

/// Prints the devices, the link matrix and NCCL's state. Returns the exit code (0, also with no device).
int run_topo(const TopoArgs& args);

/// Runs every operation on every path with verification; PASS/FAIL/SKIP per path. Returns 0 when nothing
/// failed, 1 when something did, exit_no_device without a device.
int run_check(const CheckArgs& args);

/// Writes a ctest resource spec with one "gpus" resource per visible device. Returns the exit code.
int run_resource_spec(const ResourceSpecArgs& args);

/// Starts the ranks of one job on this host and waits for them. Returns the first failing rank's exit code
/// (128 + the signal for a rank killed by one), 128 + the signal when one was passed on, 128 + SIGPIPE when
/// its stdout or stderr was closed (the ranks stopped then), 124 when --timeout passed with ranks running
/// (named, with the exits so far, and stopped), else 0.
/// @throws Error(Errc::invalid_option) for a missing program, a bad -n, a --grace outside 0 to 86400 s or a
///         --timeout outside (0, 1 year]
int run_launch(const LaunchArgs& args);

}  // namespace gpuxfer::cli
