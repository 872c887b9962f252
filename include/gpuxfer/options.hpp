/// @file options.hpp
/// @brief Configuration of a MultiGpuManager, and its GPUXFER_* environment variables.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuxfer {

/// Half the hardware threads, between 1 and 16: host memcpy bandwidth grows up to about 16 threads.
[[nodiscard]] unsigned default_host_threads() noexcept;

/// Where the staging memory and the host copy threads of each device live.
enum class NumaPlacement {
  automatic,  ///< on the device's NUMA node when the host has two or more nodes, else as cudaHostAlloc places it
  on,         ///< on the device's NUMA node whenever it is known (also on a one-node host)
  off,        ///< cudaHostAlloc's placement and unpinned copy threads, whatever the host
};

/// "automatic", "on" or "off".
[[nodiscard]] std::string_view to_string(NumaPlacement placement) noexcept;

/// Parses auto/automatic, on, off (any case). @throws Error(Errc::invalid_option)
[[nodiscard]] NumaPlacement parse_numa_placement(std::string_view text);

/// Settings of a MultiGpuManager. Each field's default comes from the GPUXFER_* variable its comment
/// names (Options::from_env; docs/ENVIRONMENT.md lists them with examples); a value set in code wins.
struct Options {
  /// CUDA ordinals to use, in this order; empty means every visible device. GPUXFER_DEVICES=0,1
  std::vector<int> devices;
  /// Fewer usable devices than this makes MultiGpuManager::create throw Errc::no_device. 0 is allowed:
  /// the manager then has whatever devices exist, possibly none. GPUXFER_MIN_DEVICES
  int min_devices = 1;
  /// Enable peer access between every pair of devices that supports it. GPUXFER_PEER_ACCESS
  bool enable_peer_access = true;
  /// Use NCCL for device-rooted broadcasts when it is available. GPUXFER_NCCL
  bool enable_nccl = true;
  /// Upper bound on pinned host memory held by the staging pool (in use plus cached); at least
  /// min_pool_chunks x chunk_bytes. GPUXFER_POOL_LIMIT=4GiB
  std::size_t pool_limit_bytes = std::size_t{16} << 30;
  /// Pinned blocks the pool allocates for each device when the manager is made (on the device's staging
  /// node), so that no call pins them later: pinning costs about 100 ms per 256 MiB. A loop that keeps the
  /// previous gather's result while the next one runs needs two blocks of the buffer's size per device
  /// (`2x256MiB`); one transfer of a size needs one. Empty: none; the pool pins as calls ask.
  /// GPUXFER_POOL_RESERVE=2x256MiB
  std::vector<std::size_t> pool_reserve;
  /// Chunk size of the pipelined paths (the staged device copy, scatter/all-gather broadcast); pageable
  /// transfers take chunks of at most 4 MiB, fewer when this is smaller. GPUXFER_CHUNK_BYTES=8MiB
  std::size_t chunk_bytes = std::size_t{8} << 20;
  /// Threads that copy between pageable and pinned host memory, besides the calling thread (which queues
  /// the GPU's copies of a pageable transfer meanwhile). GPUXFER_HOST_THREADS
  unsigned host_threads = default_host_threads();
  /// NUMA placement of each device's staging memory and host copy threads (per node: host_threads
  /// threads). GPUXFER_NUMA=auto|on|off
  NumaPlacement numa = NumaPlacement::automatic;
  /// A gather captured into a CUDA graph copies each device's piece of at most 64 KiB, 16-byte aligned at
  /// both ends, into pinned memory the device maps at its own address, with a small kernel (a replay runs
  /// it sooner than a copy-engine node); false keeps every captured copy on the copy engines, using no SM,
  /// for graphs whose kernels should have every SM to themselves. GPUXFER_CAPTURE_KERNELS
  bool capture_copy_kernels = true;
  /// 0: one device per GPU. N > 0: N logical devices spread round-robin over the GPUs the manager would
  /// otherwise use (devices, or every visible one), each with its own streams, staging and ordering, as
  /// a separate GPU would have; for developing and testing multi-GPU code on fewer GPUs. Between two
  /// logical devices of one GPU a copy is a device-to-device copy (LinkKind::same_gpu) and NCCL is off.
  /// See docs/SIMULATED_DEVICES.md for what it does not simulate. GPUXFER_SIMULATED_DEVICES
  std::size_t simulated_devices = 0;

  /// The most simulated devices a manager takes.
  static constexpr std::size_t max_simulated_devices = 64;

  /// The chunks a pipelined path needs in flight at least (a pageable transfer: 4 slots, more when the
  /// pool has room; a staged copy: 3), so the least pool_limit_bytes may hold.
  static constexpr std::size_t min_pool_chunks = 4;

  /// Built-in defaults overridden by the GPUXFER_* variables of the process environment.
  /// @throws Error(Errc::invalid_option) naming the variable when a value does not parse or is out of range
  [[nodiscard]] static Options from_env();

  /// Throws Error(Errc::invalid_option) naming the field when a value is out of range.
  void validate() const;
};

/// Looks up an environment variable; returns nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

/// @p base with every GPUXFER_* variable that @p lookup finds applied, then validated.
/// @throws Error(Errc::invalid_option) naming the variable and its value
[[nodiscard]] Options apply_env(Options base, const EnvLookup& lookup);

/// Parses a byte count: a plain integer or one with a suffix K, M, G, T (powers of 1024; "KiB", "KB"
/// and "k" mean the same). @throws Error(Errc::invalid_option) on anything else or on overflow
[[nodiscard]] std::size_t parse_size(std::string_view text);

/// Parses a list of block sizes, comma-separated, each a parse_size() text with an optional count in
/// front: "2x256MiB,64M" is {256 MiB, 256 MiB, 64 MiB}. @throws Error(Errc::invalid_option)
[[nodiscard]] std::vector<std::size_t> parse_size_list(std::string_view text);

/// Parses 1/0, on/off, true/false, yes/no (any case). @throws Error(Errc::invalid_option)
[[nodiscard]] bool parse_bool(std::string_view text);

/// Parses a comma-separated list of non-negative integers ("0,1,3"). @throws Error(Errc::invalid_option)
[[nodiscard]] std::vector<int> parse_device_list(std::string_view text);

}  // namespace gpuxfer
