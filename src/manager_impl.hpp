// What a MultiGpuManager holds, shared with the transfer engine.
#pragma once

#include <string>
#include <vector>

#include <gpuxfer/device_info.hpp>
#include <gpuxfer/options.hpp>
#include <gpuxfer/pinned_pool.hpp>

#include "cuda_handles.hpp"
#include "host_copy_pool.hpp"
#include "nccl_comms.hpp"

namespace gpuxfer::detail {

/// One device's copy streams: one per direction so that uploads, downloads and peer traffic overlap.
struct DeviceContext {
  explicit DeviceContext(int device)
      : ordinal(device), upload(device), download(device), peer(device), scratch(device, scratch_keep_bytes) {}
  static constexpr std::size_t scratch_keep_bytes = std::size_t{256} << 20;
  int ordinal;
  Stream upload;    // host -> this device
  Stream download;  // this device -> host
  Stream peer;      // this device -> other devices
  MemPool scratch;  // stream-ordered scratch space (gather_slices' packing buffer)
};

struct ManagerImpl {
  explicit ManagerImpl(const Options& opts)
      : options(opts), pool(opts.pool_limit_bytes), host_copy(opts.host_threads) {}

  Options options;
  std::string device_status;
  std::vector<DeviceInfo> devices;
  std::vector<std::vector<LinkKind>> links;
  std::vector<std::vector<char>> peer;  // peer[a][b]: a's memory reachable from b and back
  bool all_peers = false;
  std::vector<std::unique_ptr<DeviceContext>> contexts;
  PinnedPool pool;
  HostCopyPool host_copy;
  NcclComms nccl;
  int nccl_version = 0;

  [[nodiscard]] std::size_t size() const noexcept { return devices.size(); }
  [[nodiscard]] int ordinal(std::size_t index) const noexcept { return devices[index].ordinal; }
  [[nodiscard]] DeviceContext& context(std::size_t index) const noexcept { return *contexts[index]; }
  [[nodiscard]] std::vector<int> ordinals() const;
};

/// "device 1 (ordinal 3)": how messages name a device.
[[nodiscard]] std::string device_name(const ManagerImpl& impl, std::size_t index);

/// Throws Error(Errc::invalid_buffer) unless @p index < impl.size(); @p what names the argument.
void check_index(const ManagerImpl& impl, std::size_t index, const char* what);

}  // namespace gpuxfer::detail
