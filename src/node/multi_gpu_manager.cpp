#include <gpuxfer/detail/device_guard.hpp>
#include <gpuxfer/multi_gpu_manager.hpp>

#include <algorithm>
#include <string>

#include <nccl.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/host_buffer.hpp>

#include "cuda/block_kernels.hpp"
#include "cuda/copy_kernels.hpp"
#include "memory/pool_state.hpp"
#include "node/manager_state.hpp"
#include "node/numa.hpp"
#include "node/topology.hpp"
#include "runtime/capture_mode.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/log.hpp"

namespace gpuxfer {
namespace detail {

ManagerState& ManagerState::of(const MultiGpuManager& manager) noexcept { return *manager.state_; }

std::vector<int> ManagerState::ordinals() const {
  std::vector<int> out;
  out.reserve(devices.size());
  for (const auto& d : devices) out.push_back(d.ordinal);
  return out;
}

std::string device_name(const ManagerState& state, std::size_t index) {
  std::string name = "device " + std::to_string(index);
  if (index < state.size() && state.ordinal(index) != static_cast<int>(index)) {
    name += " (CUDA ordinal " + std::to_string(state.ordinal(index)) + ")";
  }
  return name;
}

void check_index(const ManagerState& state, std::size_t index, const char* what) {
  if (index >= state.size()) {
    throw Error(Errc::invalid_buffer, std::string(what) + " index " + std::to_string(index) +
                                          " is out of range: the manager has " + std::to_string(state.size()) +
                                          " device" + (state.size() == 1 ? "" : "s"));
  }
}

namespace {

// The ordinals to manage, or an empty list with state.device_status saying why.
std::vector<int> usable_ordinals(ManagerState& state) {
  int count = 0;
  const cudaError_t err = handled(cudaGetDeviceCount(&count));
  if (err != cudaSuccess) {
    state.device_status = describe_cuda_error(err);
    return {};
  }
  if (count == 0) state.device_status = "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)";
  if (state.options.devices.empty()) {
    std::vector<int> all(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) all[static_cast<std::size_t>(i)] = i;
    return all;
  }
  for (const int ordinal : state.options.devices) {
    if (ordinal >= count) {
      throw Error(Errc::invalid_option, "Options::devices names CUDA ordinal " + std::to_string(ordinal) +
                                            " but only " + std::to_string(count) + " devices are visible");
    }
  }
  return state.options.devices;
}

// Options::simulated_devices logical devices round-robin over @p real (none when there is no GPU).
std::vector<int> simulated(const std::vector<int>& real, std::size_t count) {
  std::vector<int> out;
  for (std::size_t i = 0; !real.empty() && i < count; ++i) out.push_back(real[i % real.size()]);
  return out;
}

// Why NCCL cannot serve these devices, or an empty string. NCCL refuses two ranks on one GPU
// (ncclCommInitAll over {0, 0} returns ncclInvalidUsage).
std::string nccl_refusal(const ManagerState& state) {
  if (!state.options.enable_nccl) return "disabled (Options::enable_nccl, GPUXFER_NCCL)";
  for (std::size_t a = 0; a < state.size(); ++a) {
    for (std::size_t b = a + 1; b < state.size(); ++b) {
      if (state.ordinal(a) == state.ordinal(b)) {
        return "off between simulated devices of one GPU (" + device_name(state, a) + " and " +
               device_name(state, b) + "): NCCL takes one rank per GPU";
      }
    }
  }
  return {};
}

void enable_peers(ManagerState& state) {
  const std::size_t n = state.size();
  state.peer.assign(n, std::vector<char>(n, 0));
  state.all_peers = true;  // vacuously, with fewer than two devices
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      if (!state.options.enable_peer_access || state.links[a][b] == LinkKind::host_staged) {
        state.all_peers = false;
        continue;
      }
      if (state.links[a][b] == LinkKind::same_gpu) {  // one GPU's memory: no peer mapping to enable
        state.peer[a][b] = 1;
        continue;
      }
      DeviceGuard guard(state.ordinal(a));
      const RelaxedCapture relaxed;
      const cudaError_t err = handled(cudaDeviceEnablePeerAccess(state.ordinal(b), 0));
      if (err != cudaSuccess && err != cudaErrorPeerAccessAlreadyEnabled) {
        GPUXFER_LOG(warn, "peer access " + device_name(state, a) + " -> " + device_name(state, b) +
                              " not enabled: " + cudaGetErrorName(err) + "; copies go through the host");
        state.all_peers = false;
        continue;
      }
      state.peer[a][b] = 1;
    }
  }
  // A pair counts as peer-enabled only when both directions are.
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) {
      if (a != b && state.peer[a][b] != state.peer[b][a]) {
        state.peer[a][b] = state.peer[b][a] = 0;
        state.all_peers = false;
      }
    }
  }
}

}  // namespace

void place_on_numa_nodes(ManagerState& state) {
  std::vector<int> device_nodes;
  for (const DeviceInfo& d : state.devices) device_nodes.push_back(d.numa_node);
  const std::vector<int> staging = staging_nodes(device_nodes, state.options.numa, numa_nodes().size());
  std::vector<int> workers_node;  // the node of each set in copy_workers
  for (std::size_t i = 0; i < state.size(); ++i) {
    DeviceInfo& d = state.devices[i];
    if (d.numa_node >= 0) d.numa_cpus = format_cpu_list(cpus_of_node(d.numa_node));
    d.staging_node = staging[i];
    auto known = std::find(workers_node.begin(), workers_node.end(), d.staging_node);
    if (known == workers_node.end()) {
      const std::vector<int> cpus = d.staging_node >= 0 ? cpus_of_node(d.staging_node) : std::vector<int>{};
      state.copy_workers.push_back(std::make_unique<HostCopyWorkers>(state.options.host_threads, cpus));
      workers_node.push_back(d.staging_node);
      known = std::prev(workers_node.end());
    }
    state.workers_of.push_back(static_cast<std::size_t>(known - workers_node.begin()));
    if (d.staging_node >= 0) {
      GPUXFER_LOG(info, device_name(state, i) + ": staging and copy threads on NUMA node " +
                            std::to_string(d.staging_node) + " (CPUs " + d.numa_cpus + ")");
    }
  }
}

// Options::pool_reserve: every device's blocks pinned now on its staging node, all held at once (so that
// each is a block of its own), then left in the pool's cache for the calls to come.
void reserve_pinned(ManagerState& state) {
  if (state.options.pool_reserve.empty()) return;
  std::vector<HostBuffer> held;
  held.reserve(state.devices.size() * state.options.pool_reserve.size());
  for (std::size_t d = 0; d < state.devices.size(); ++d) {
    for (const std::size_t bytes : state.options.pool_reserve) held.push_back(state.pool.acquire(bytes, state.staging_node(d)));
  }
  GPUXFER_LOG(info, "pinned pool reserved " + std::to_string(held.size()) + " blocks for " +
                        std::to_string(state.devices.size()) + " devices (Options::pool_reserve)");
}

// Loads the library's kernels into each device's context now: loaded at an operation's first launch
// instead (CUDA's lazy loading), a kernel may wait for the work running on the device, and a stream-ordered
// operation would block its caller (block_kernels.hpp). A kernel that cannot load (no code for this
// device) is left for the operation that launches it to report.
void load_kernels(const ManagerState& state) {
  for (std::size_t d = 0; d < state.devices.size(); ++d) {
    DeviceGuard guard(state.ordinal(d));
    const RelaxedCapture relaxed;
    for (const cudaError_t err : {handled(load_block_kernels()), handled(load_copy_kernels())}) {
      if (err != cudaSuccess) {
        GPUXFER_LOG(warn,
                    "loading gpuxfer's kernels on " + device_name(state, d) + ": " + cudaGetErrorString(err));
      }
    }
  }
}

}  // namespace detail

std::shared_ptr<MultiGpuManager> MultiGpuManager::create(Options options) {
  options.validate();
  auto state = std::make_unique<detail::ManagerState>(options);
  std::vector<int> ordinals = detail::usable_ordinals(*state);
  if (options.simulated_devices > 0) ordinals = detail::simulated(ordinals, options.simulated_devices);
  if (static_cast<int>(ordinals.size()) < options.min_devices) {
    throw Error(Errc::no_device, "found " + std::to_string(ordinals.size()) + " usable CUDA device(s), need at least " +
                                     std::to_string(options.min_devices) +
                                     (state->device_status.empty() ? std::string{} : ": " + state->device_status));
  }
  for (const int ordinal : ordinals) {
    state->devices.push_back(detail::read_device_info(ordinal));
    state->devices.back().simulated = options.simulated_devices > 0;
  }
  // Pinning from a thread without a context happens under the manager's first device, never device 0
  // when the manager was not asked to use it.
  if (!ordinals.empty()) detail::PoolState::of(state->pool).device = ordinals.front();
  detail::place_on_numa_nodes(*state);
  detail::reserve_pinned(*state);
  state->links = detail::read_links(state->devices);
  detail::enable_peers(*state);
  detail::load_kernels(*state);
  for (const int ordinal : ordinals) state->device_streams.push_back(std::make_unique<detail::DeviceStreams>(ordinal));
  state->capture_streams.resize(ordinals.size());  // each device's sets, made as captures need them
  state->nccl_status = detail::nccl_refusal(*state);
  if (state->nccl_status.empty()) {
    int version = 0;
    if (ncclGetVersion(&version) == ncclSuccess) {
      state->nccl_version = version;
    } else {
      state->nccl_status = "not available (ncclGetVersion failed)";
    }
  }
  GPUXFER_LOG(info, "manager over " + std::to_string(ordinals.size()) +
                        (options.simulated_devices > 0 ? " simulated" : "") + " devices, all peers " +
                        (state->all_peers ? "enabled" : "not enabled") + ", NCCL " +
                        (state->nccl_version != 0 ? std::to_string(state->nccl_version) : state->nccl_status));
  return std::shared_ptr<MultiGpuManager>(new MultiGpuManager(std::move(state)));
}

MultiGpuManager::MultiGpuManager(std::unique_ptr<detail::ManagerState> state) : state_(std::move(state)) {}

MultiGpuManager::~MultiGpuManager() = default;

std::size_t MultiGpuManager::device_count() const noexcept { return state_->size(); }

const DeviceInfo& MultiGpuManager::device(std::size_t index) const {
  detail::check_index(*state_, index, "device");
  return state_->devices[index];
}

std::span<const DeviceInfo> MultiGpuManager::devices() const noexcept { return state_->devices; }

LinkKind MultiGpuManager::link(std::size_t src, std::size_t dst) const {
  detail::check_index(*state_, src, "source device");
  detail::check_index(*state_, dst, "destination device");
  return state_->links[src][dst];
}

bool MultiGpuManager::peer_enabled(std::size_t src, std::size_t dst) const {
  detail::check_index(*state_, src, "source device");
  detail::check_index(*state_, dst, "destination device");
  return src != dst && state_->peer[src][dst] != 0;
}

bool MultiGpuManager::all_peers_enabled() const noexcept { return state_->all_peers; }

bool MultiGpuManager::nccl_available() const noexcept { return state_->nccl_version != 0; }

int MultiGpuManager::nccl_version() const noexcept { return state_->nccl_version; }

const std::string& MultiGpuManager::nccl_status() const noexcept { return state_->nccl_status; }

const std::string& MultiGpuManager::device_status() const noexcept { return state_->device_status; }

const Options& MultiGpuManager::options() const noexcept { return state_->options; }

PinnedPool& MultiGpuManager::pinned_pool() noexcept { return state_->pool; }

}  // namespace gpuxfer
