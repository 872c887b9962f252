#include <gpuxfer/multi_gpu_manager.hpp>

#include <string>

#include <nccl.h>

#include <gpuxfer/error.hpp>

#include "cuda_check.hpp"
#include "log.hpp"
#include "manager_impl.hpp"
#include "topology.hpp"

namespace gpuxfer {
namespace detail {

std::vector<int> ManagerImpl::ordinals() const {
  std::vector<int> out;
  out.reserve(devices.size());
  for (const auto& d : devices) out.push_back(d.ordinal);
  return out;
}

std::string device_name(const ManagerImpl& impl, std::size_t index) {
  std::string name = "device " + std::to_string(index);
  if (index < impl.size() && impl.ordinal(index) != static_cast<int>(index)) {
    name += " (CUDA ordinal " + std::to_string(impl.ordinal(index)) + ")";
  }
  return name;
}

void check_index(const ManagerImpl& impl, std::size_t index, const char* what) {
  if (index >= impl.size()) {
    throw Error(Errc::invalid_buffer, std::string(what) + " index " + std::to_string(index) +
                                          " is out of range: the manager has " + std::to_string(impl.size()) +
                                          " device" + (impl.size() == 1 ? "" : "s"));
  }
}

namespace {

// The ordinals to manage, or an empty list with impl.device_status saying why.
std::vector<int> usable_ordinals(ManagerImpl& impl) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    impl.device_status = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    return {};
  }
  if (count == 0) impl.device_status = "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)";
  if (impl.options.devices.empty()) {
    std::vector<int> all(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) all[static_cast<std::size_t>(i)] = i;
    return all;
  }
  for (const int ordinal : impl.options.devices) {
    if (ordinal >= count) {
      throw Error(Errc::invalid_option, "Options::devices names CUDA ordinal " + std::to_string(ordinal) +
                                            " but only " + std::to_string(count) + " devices are visible");
    }
  }
  return impl.options.devices;
}

void enable_peers(ManagerImpl& impl) {
  const std::size_t n = impl.size();
  impl.peer.assign(n, std::vector<char>(n, 0));
  impl.all_peers = true;  // vacuously, with fewer than two devices
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      if (!impl.options.enable_peer_access || impl.links[a][b] == LinkKind::host_staged) {
        impl.all_peers = false;
        continue;
      }
      DeviceGuard guard(impl.ordinal(a));
      const cudaError_t err = cudaDeviceEnablePeerAccess(impl.ordinal(b), 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
      } else if (err != cudaSuccess) {
        (void)cudaGetLastError();
        GPUXFER_LOG(warn, "peer access " + device_name(impl, a) + " -> " + device_name(impl, b) +
                              " not enabled: " + cudaGetErrorName(err) + "; copies go through the host");
        impl.all_peers = false;
        continue;
      }
      impl.peer[a][b] = 1;
    }
  }
  // A pair counts as peer-enabled only when both directions are.
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) {
      if (a != b && impl.peer[a][b] != impl.peer[b][a]) {
        impl.peer[a][b] = impl.peer[b][a] = 0;
        impl.all_peers = false;
      }
    }
  }
}

}  // namespace
}  // namespace detail

std::shared_ptr<MultiGpuManager> MultiGpuManager::create(Options options) {
  options.validate();
  auto impl = std::make_unique<detail::ManagerImpl>(options);
  const std::vector<int> ordinals = detail::usable_ordinals(*impl);
  if (static_cast<int>(ordinals.size()) < options.min_devices) {
    throw Error(Errc::no_device, "found " + std::to_string(ordinals.size()) + " usable CUDA device(s), need at least " +
                                     std::to_string(options.min_devices) +
                                     (impl->device_status.empty() ? std::string{} : ": " + impl->device_status));
  }
  for (const int ordinal : ordinals) impl->devices.push_back(detail::read_device_info(ordinal));
  impl->links = detail::read_links(impl->devices);
  detail::enable_peers(*impl);
  for (const int ordinal : ordinals) impl->contexts.push_back(std::make_unique<detail::DeviceContext>(ordinal));
  if (options.enable_nccl) {
    int version = 0;
    if (ncclGetVersion(&version) == ncclSuccess) impl->nccl_version = version;
  }
  GPUXFER_LOG(info, "manager over " + std::to_string(ordinals.size()) + " devices, all peers " +
                        (impl->all_peers ? "enabled" : "not enabled") + ", NCCL " +
                        std::to_string(impl->nccl_version));
  return std::shared_ptr<MultiGpuManager>(new MultiGpuManager(std::move(impl)));
}

MultiGpuManager::MultiGpuManager(std::unique_ptr<detail::ManagerImpl> impl) : impl_(std::move(impl)) {}

MultiGpuManager::~MultiGpuManager() = default;

std::size_t MultiGpuManager::device_count() const noexcept { return impl_->size(); }

const DeviceInfo& MultiGpuManager::device(std::size_t index) const {
  detail::check_index(*impl_, index, "device");
  return impl_->devices[index];
}

std::span<const DeviceInfo> MultiGpuManager::devices() const noexcept { return impl_->devices; }

LinkKind MultiGpuManager::link(std::size_t src, std::size_t dst) const {
  detail::check_index(*impl_, src, "source device");
  detail::check_index(*impl_, dst, "destination device");
  return impl_->links[src][dst];
}

bool MultiGpuManager::peer_enabled(std::size_t src, std::size_t dst) const {
  detail::check_index(*impl_, src, "source device");
  detail::check_index(*impl_, dst, "destination device");
  return src != dst && impl_->peer[src][dst] != 0;
}

bool MultiGpuManager::all_peers_enabled() const noexcept { return impl_->all_peers; }

bool MultiGpuManager::nccl_available() const noexcept { return impl_->nccl_version != 0; }

int MultiGpuManager::nccl_version() const noexcept { return impl_->nccl_version; }

const std::string& MultiGpuManager::device_status() const noexcept { return impl_->device_status; }

const Options& MultiGpuManager::options() const noexcept { return impl_->options; }

PinnedPool& MultiGpuManager::pinned_pool() noexcept { return impl_->pool; }

}  // namespace gpuxfer
