// What a MultiGpuManager holds: the devices, their links and streams, the staging pool, the host copy
// workers and the NCCL communicators. Every operation of the engine reaches the node through this.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gpuxfer/device_info.hpp>
#include <gpuxfer/options.hpp>
#include <gpuxfer/pinned_pool.hpp>

#include "memory/host_copy_workers.hpp"
#include "node/nccl_comms.hpp"
#include "runtime/mem_pool.hpp"
#include "runtime/stream.hpp"

namespace gpuxfer {
class MultiGpuManager;
}

namespace gpuxfer::detail {

/// One device's streams, one per direction so that uploads, downloads and device-to-device traffic
/// overlap, one for NCCL, and its scratch memory.
struct DeviceStreams {
  explicit DeviceStreams(int device)
      : ordinal(device),
        h2d(device),
        d2h(device),
        d2d(device),
        nccl(device),
        scratch(device, scratch_keep_bytes) {}
  static constexpr std::size_t scratch_keep_bytes = std::size_t{256} << 20;
  int ordinal;
  Stream h2d;       // host -> this device
  Stream d2h;       // this device -> host
  Stream d2d;       // this device <-> other devices: the peer copies this device issues
  Stream nccl;      // NCCL collectives alone: their kernels wait for each other across devices, so no copy
                    // that waits on another device may queue between them (engine/collectives.cpp)
  MemPool scratch;  // stream-ordered scratch space (gather_slices' packing buffer)

  /// The four copy streams.
  [[nodiscard]] std::array<cudaStream_t, 4> copy_streams() const noexcept {
    return {h2d.get(), d2h.get(), d2d.get(), nccl.get()};
  }
};

struct ManagerState {
  explicit ManagerState(const Options& opts) : options(opts), pool(opts.pool_limit_bytes) {}

  Options options;
  std::string device_status;
  std::vector<DeviceInfo> devices;
  std::vector<std::vector<LinkKind>> links;
  std::vector<std::vector<char>> peer;  // peer[a][b]: a's memory reachable from b and back
  bool all_peers = false;
  std::vector<std::unique_ptr<DeviceStreams>> device_streams;
  // Captured work's streams, per device, each set taken by one capture at a time: a stream that waits for
  // a capturing stream's work belongs to that capture until it ends, so captured work never goes on
  // device_streams, which every other operation shares (OperationOrder::begin, engine/ordering.cpp).
  std::mutex capture_mutex;
  std::vector<std::vector<std::unique_ptr<DeviceStreams>>> capture_streams;
  PinnedPool pool;
  std::vector<std::unique_ptr<HostCopyWorkers>> copy_workers;  // one set per staging node in use
  std::vector<std::size_t> workers_of;                         // device index -> its set in copy_workers
  NcclComms nccl;
  int nccl_version = 0;
  std::string nccl_status;  // why nccl_version is 0; empty when NCCL is available

  [[nodiscard]] std::size_t size() const noexcept { return devices.size(); }
  [[nodiscard]] int ordinal(std::size_t index) const noexcept { return devices[index].ordinal; }
  [[nodiscard]] DeviceStreams& streams_of(std::size_t index) const noexcept { return *device_streams[index]; }
  [[nodiscard]] std::vector<int> ordinals() const;
  /// The NUMA node device @p index stages on (DeviceInfo::staging_node): -1 for cudaHostAlloc's placement.
  [[nodiscard]] int staging_node(std::size_t index) const noexcept { return devices[index].staging_node; }
  /// The host copy threads of device @p index (on its staging node's CPUs when it has one).
  [[nodiscard]] HostCopyWorkers& host_copy(std::size_t index) const noexcept { return *copy_workers[workers_of[index]]; }

  /// The state behind @p manager (MultiGpuManager keeps it private to everyone but the library).
  [[nodiscard]] static ManagerState& of(const MultiGpuManager& manager) noexcept;
};

/// "device 1 (ordinal 3)": how messages name a device.
[[nodiscard]] std::string device_name(const ManagerState& m, std::size_t index);

/// Fills each device's numa_cpus and staging_node (Options::numa) and starts one set of host copy threads
/// per staging node, placed on that node's CPUs.
void place_on_numa_nodes(ManagerState& m);

/// Throws Error(Errc::invalid_buffer) unless @p index < m.size(); @p what names the argument.
void check_index(const ManagerState& m, std::size_t index, const char* what);

}  // namespace gpuxfer::detail
