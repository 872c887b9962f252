// The host's NUMA layout as Linux describes it in sysfs: which node a PCI device hangs off, which CPUs a
// node has. Every reader takes the sysfs root, so tests can describe a host they are not running on.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <gpuxfer/options.hpp>

namespace gpuxfer::detail {

/// The NUMA node of PCI device @p bus_id ("0000:1b:00.0"; the runtime's 8-digit domain is accepted) under
/// @p sysfs; on a host with one node that node; -1 when unknown.
[[nodiscard]] int numa_node_of(const std::string& bus_id, const std::filesystem::path& sysfs = "/sys") noexcept;

/// The host's NUMA node ids, ascending (empty when sysfs says nothing).
[[nodiscard]] std::vector<int> numa_nodes(const std::filesystem::path& sysfs = "/sys") noexcept;

/// The CPUs of NUMA node @p node, ascending; empty when unknown.
[[nodiscard]] std::vector<int> cpus_of_node(int node, const std::filesystem::path& sysfs = "/sys") noexcept;

/// Parses a Linux CPU list ("0-3,8,10-11"); empty for text that is not one.
[[nodiscard]] std::vector<int> parse_cpu_list(std::string_view text) noexcept;

/// The inverse of parse_cpu_list: "0-3,8,10-11" for {0,1,2,3,8,10,11}.
[[nodiscard]] std::string format_cpu_list(const std::vector<int>& cpus);

/// The NUMA node each device's staging memory and copy threads go on, from the devices' nodes
/// (@p device_nodes, -1 where unknown), the placement asked for and the number of nodes the host has:
/// -1 where nothing is placed (cudaHostAlloc's memory, unpinned threads).
[[nodiscard]] std::vector<int> staging_nodes(const std::vector<int>& device_nodes, NumaPlacement placement,
                                             std::size_t host_nodes);

}  // namespace gpuxfer::detail
