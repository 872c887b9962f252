/// @file device_info.hpp
/// @brief What gpuxfer knows about each device and about the links between devices.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpuxfer {

/// The link the hardware offers between two devices. Whether peer access is actually on (it can be
/// switched off in Options) is MultiGpuManager::peer_enabled.
enum class LinkKind {
  self,         ///< the same device
  nvlink,       ///< peer access possible over NVLink (peer access with native atomics)
  pcie_peer,    ///< peer access possible over PCIe
  host_staged,  ///< no peer access possible: bytes go through pinned host memory
  same_gpu,     ///< two simulated devices of one GPU (Options::simulated_devices): a device-to-device copy
};

/// "self", "nvlink", "pcie_peer", "host_staged" or "same_gpu".
[[nodiscard]] std::string_view to_string(LinkKind kind) noexcept;

/// One CUDA device as the manager sees it.
struct DeviceInfo {
  int ordinal = -1;               ///< CUDA device ordinal (after CUDA_VISIBLE_DEVICES)
  std::string name;               ///< "NVIDIA H200"
  std::size_t total_memory = 0;   ///< bytes of device memory
  int cc_major = 0;               ///< compute capability, major
  int cc_minor = 0;               ///< compute capability, minor
  std::string pci_bus_id;         ///< "0000:1b:00.0"
  int numa_node = -1;             ///< host NUMA node closest to the device; -1 when unknown
  std::string numa_cpus;          ///< the CPUs of that node as Linux lists them ("0-15,32-47"); empty when unknown
  int staging_node = -1;          ///< the NUMA node gpuxfer stages this device's bytes and runs its copy
                                  ///< threads on (Options::numa); -1: cudaHostAlloc's placement, unpinned threads
  int copy_engines = 0;           ///< asynchronous copy engines (cudaDevAttrAsyncEngineCount)
  int multiprocessors = 0;        ///< streaming multiprocessors
  bool simulated = false;         ///< one of Options::simulated_devices logical devices over the GPU @p ordinal
};

}  // namespace gpuxfer
