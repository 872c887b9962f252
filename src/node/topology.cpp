#include "node/topology.hpp"

#include <algorithm>
#include <cctype>

#include <cuda_runtime_api.h>

#include "node/numa.hpp"
#include "runtime/cuda_check.hpp"

namespace gpuxfer {

std::string_view to_string(LinkKind kind) noexcept {
  switch (kind) {
    case LinkKind::self: return "self";
    case LinkKind::nvlink: return "nvlink";
    case LinkKind::pcie_peer: return "pcie_peer";
    case LinkKind::host_staged: return "host_staged";
    case LinkKind::same_gpu: return "same_gpu";
  }
  return "unknown";
}

namespace detail {
namespace {

int attribute(cudaDeviceAttr attr, int ordinal) {
  int value = 0;
  GPUXFER_CUDA_TRY_CTX(cudaDeviceGetAttribute(&value, attr, ordinal), "ordinal " + std::to_string(ordinal));
  return value;
}

}  // namespace

DeviceInfo read_device_info(int ordinal) {
  DeviceInfo info;
  info.ordinal = ordinal;
  cudaDeviceProp prop{};
  GPUXFER_CUDA_TRY_CTX(cudaGetDeviceProperties(&prop, ordinal), "ordinal " + std::to_string(ordinal));
  info.name = prop.name;
  info.total_memory = prop.totalGlobalMem;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.copy_engines = attribute(cudaDevAttrAsyncEngineCount, ordinal);
  char bus_id[32] = {};
  GPUXFER_CUDA_TRY_CTX(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, ordinal), "ordinal " + std::to_string(ordinal));
  info.pci_bus_id = bus_id;
  info.numa_node = numa_node_of(info.pci_bus_id);
  return info;
}

std::vector<std::vector<LinkKind>> read_links(const std::vector<DeviceInfo>& devices) {
  const std::size_t n = devices.size();
  std::vector<std::vector<LinkKind>> links(n, std::vector<LinkKind>(n, LinkKind::host_staged));
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) {
      if (a == b) {
        links[a][b] = LinkKind::self;
        continue;
      }
      const int src = devices[a].ordinal;
      const int dst = devices[b].ordinal;
      if (src == dst) {  // simulated devices of one GPU
        links[a][b] = LinkKind::same_gpu;
        continue;
      }
      int can_access = 0;
      GPUXFER_CUDA_TRY_CTX(cudaDeviceCanAccessPeer(&can_access, src, dst),
                           "ordinals " + std::to_string(src) + " -> " + std::to_string(dst));
      if (can_access == 0) continue;
      int atomics = 0;
      GPUXFER_CUDA_TRY(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, src, dst));
      links[a][b] = atomics != 0 ? LinkKind::nvlink : LinkKind::pcie_peer;
    }
  }
  return links;
}

}  // namespace detail
}  // namespace gpuxfer
