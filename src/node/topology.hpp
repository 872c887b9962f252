// Reading devices and the links between them.
#pragma once

#include <string>
#include <vector>

#include <gpuxfer/device_info.hpp>

namespace gpuxfer::detail {

/// Name, memory, compute capability, PCI bus id, NUMA node and engines of CUDA device @p ordinal.
[[nodiscard]] DeviceInfo read_device_info(int ordinal);

/// The link matrix of @p devices: nvlink where peer access is possible with native atomics, pcie_peer
/// where it is possible without them, host_staged elsewhere. (Without NVML, native peer atomics are
/// the runtime's signal for an NVLink-class link.)
[[nodiscard]] std::vector<std::vector<LinkKind>> read_links(const std::vector<DeviceInfo>& devices);

}  // namespace gpuxfer::detail
