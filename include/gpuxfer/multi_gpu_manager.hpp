/// @file multi_gpu_manager.hpp
/// @brief MultiGpuManager: the devices of this process, their links, copy streams and staging memory.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include <gpuxfer/device_info.hpp>
#include <gpuxfer/options.hpp>
#include <gpuxfer/pinned_pool.hpp>

namespace gpuxfer {

namespace detail {
struct ManagerState;
}

/// @brief The devices gpuxfer works with, and what every transfer shares: device information, the
/// peer/link matrix, per-device non-blocking copy streams, the pinned staging pool and (created lazily,
/// once) the NCCL communicators. Thread-safe. Devices are addressed by index 0..device_count()-1 into the
/// manager's device list, which maps to CUDA ordinals through DeviceInfo::ordinal (several devices map
/// to one ordinal with Options::simulated_devices).
class MultiGpuManager {
 public:
  /// @brief Enumerates the devices and sets up what transfers share.
  /// @param options the settings; by default the GPUXFER_* environment's (docs/ENVIRONMENT.md)
  /// @throws Error(Errc::invalid_option) for invalid options
  /// @throws Error(Errc::no_device) with the CUDA reason when fewer than Options::min_devices are usable
  /// @throws Error(Errc::invalid_option) when Options::devices names an ordinal that does not exist
  /// @note Honours CUDA_VISIBLE_DEVICES and Options::devices; enables peer access where possible (when
  ///       Options::enable_peer_access). Without a driver, device_status() says so (docs/TROUBLESHOOTING.md).
  [[nodiscard]] static std::shared_ptr<MultiGpuManager> create(Options options = Options::from_env());

  ~MultiGpuManager();
  MultiGpuManager(const MultiGpuManager&) = delete;
  MultiGpuManager& operator=(const MultiGpuManager&) = delete;

  /// Number of devices managed (may be 0 when Options::min_devices is 0).
  [[nodiscard]] std::size_t device_count() const noexcept;
  /// Information on device @p index. @throws Error(Errc::invalid_buffer) when out of range
  [[nodiscard]] const DeviceInfo& device(std::size_t index) const;
  /// Every managed device, in index order.
  [[nodiscard]] std::span<const DeviceInfo> devices() const noexcept;
  /// How bytes travel from @p src to @p dst. @throws Error(Errc::invalid_buffer) when out of range
  [[nodiscard]] LinkKind link(std::size_t src, std::size_t dst) const;
  /// True when peer access from @p src's buffers to @p dst is enabled (both ways are enabled together).
  [[nodiscard]] bool peer_enabled(std::size_t src, std::size_t dst) const;
  /// True when every pair of distinct devices has peer access enabled (so always with one device).
  [[nodiscard]] bool all_peers_enabled() const noexcept;
  /// True when NCCL is enabled in the options and the library answered ncclGetVersion.
  [[nodiscard]] bool nccl_available() const noexcept;
  /// The NCCL version code (for example 22809), or 0 when NCCL is not available.
  [[nodiscard]] int nccl_version() const noexcept;
  /// Why NCCL is not available ("disabled (...)", "off between simulated devices of one GPU (...)"), or
  /// an empty string when it is.
  [[nodiscard]] const std::string& nccl_status() const noexcept;
  /// Why there are no devices: the CUDA error of cudaGetDeviceCount, or an empty string.
  [[nodiscard]] const std::string& device_status() const noexcept;
  /// The options in force (after the environment and validation).
  [[nodiscard]] const Options& options() const noexcept;
  /// The pinned staging pool shared by every transfer of this manager.
  [[nodiscard]] PinnedPool& pinned_pool() noexcept;

 private:
  friend struct detail::ManagerState;  // the library's own access to what the manager holds
  explicit MultiGpuManager(std::unique_ptr<detail::ManagerState> state);
  std::unique_ptr<detail::ManagerState> state_;
};

}  // namespace gpuxfer
