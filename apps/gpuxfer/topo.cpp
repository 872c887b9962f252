// `gpuxfer topo`: what the manager sees: devices, NUMA nodes, the link matrix, NCCL and the options.

#include <cstddef>
#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include <gpuxfer/device_info.hpp>
#include <gpuxfer/multi_gpu_manager.hpp>
#include <gpuxfer/testing/format.hpp>
#include <gpuxfer/version.hpp>

#include "commands.hpp"

namespace gpuxfer::cli {

using testing::format_bytes;
using testing::nccl_version_string;

namespace {

using Json = nlohmann::ordered_json;

Json options_json(const Options& o) {
  return Json{{"devices", o.devices},
              {"enable_peer_access", o.enable_peer_access},
              {"enable_nccl", o.enable_nccl},
              {"pool_limit_bytes", o.pool_limit_bytes},
              {"chunk_bytes", o.chunk_bytes},
              {"host_threads", o.host_threads},
              {"numa", std::string(to_string(o.numa))},
              {"capture_copy_kernels", o.capture_copy_kernels},
              {"simulated_devices", o.simulated_devices}};
}

Json topo_json(const MultiGpuManager& m) {
  Json devices = Json::array();
  for (const DeviceInfo& d : m.devices()) {
    devices.push_back(
        Json{{"ordinal", d.ordinal},
             {"name", d.name},
             {"total_memory", d.total_memory},
             {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
             {"pci_bus_id", d.pci_bus_id},
             {"numa_node", d.numa_node},
             {"numa_cpus", d.numa_cpus},
             {"staging_node", d.staging_node},
             {"copy_engines", d.copy_engines},
             {"multiprocessors", d.multiprocessors},
             {"simulated", d.simulated}});
  }
  Json links = Json::array();
  Json peers = Json::array();
  for (std::size_t src = 0; src < m.device_count(); ++src) {
    Json link_row = Json::array();
    Json peer_row = Json::array();
    for (std::size_t dst = 0; dst < m.device_count(); ++dst) {
      link_row.push_back(std::string(to_string(m.link(src, dst))));
      peer_row.push_back(src != dst && m.peer_enabled(src, dst));
    }
    links.push_back(std::move(link_row));
    peers.push_back(std::move(peer_row));
  }
  return Json{{"gpuxfer_version", version_string},
              {"device_count", m.device_count()},
              {"device_status", m.device_status()},
              {"devices", std::move(devices)},
              {"links", std::move(links)},
              {"peer_enabled", std::move(peers)},
              {"nccl",
               {{"available", m.nccl_available()},
                {"status", m.nccl_status()},
                {"version", m.nccl_version()},
                {"version_string", nccl_version_string(m.nccl_version())}}},
              {"options", options_json(m.options())}};
}

void print_devices(const MultiGpuManager& m) {
  std::printf("%zu %sdevice%s\n\n", m.device_count(), m.options().simulated_devices > 0 ? "simulated " : "",
              m.device_count() == 1 ? "" : "s");
  std::printf("%-5s %-7s %-24s %-10s %-4s %-14s %-5s %-4s %s\n", "index", "ordinal", "name", "memory", "cc",
              "pci bus id", "numa", "sms", "copy engines");
  for (std::size_t i = 0; i < m.device_count(); ++i) {
    const DeviceInfo& d = m.device(i);
    const std::string cc = std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
    const std::string numa = d.numa_node < 0 ? std::string("?") : std::to_string(d.numa_node);
    std::printf("%-5zu %-7d %-24s %-10s %-4s %-14s %-5s %-4d %d\n", i, d.ordinal, d.name.c_str(),
                format_bytes(d.total_memory).c_str(), cc.c_str(), d.pci_bus_id.c_str(), numa.c_str(),
                d.multiprocessors, d.copy_engines);
  }
  std::printf("\nplacement (Options::numa = %s): where each device's pinned staging and host copy threads live\n",
              std::string(to_string(m.options().numa)).c_str());
  for (std::size_t i = 0; i < m.device_count(); ++i) {
    const DeviceInfo& d = m.device(i);
    if (d.staging_node >= 0) {
      std::printf("dev%-3zu staging on NUMA node %d, copy threads on CPUs %s\n", i, d.staging_node,
                  d.numa_cpus.empty() ? "?" : d.numa_cpus.c_str());
    } else {
      std::printf("dev%-3zu staging where cudaHostAlloc puts it, copy threads unpinned%s\n", i,
                  d.numa_node >= 0 ? " (one NUMA node, or placement off)" : " (NUMA node unknown)");
    }
  }
}

void print_links(const MultiGpuManager& m) {
  std::printf("\nlinks (row: source, column: destination; * = peer access enabled)\n%-6s", "");
  for (std::size_t dst = 0; dst < m.device_count(); ++dst) {
    std::printf(" %-13s", ("dev" + std::to_string(dst)).c_str());
  }
  std::printf("\n");
  for (std::size_t src = 0; src < m.device_count(); ++src) {
    std::printf("%-6s", ("dev" + std::to_string(src)).c_str());
    for (std::size_t dst = 0; dst < m.device_count(); ++dst) {
      const LinkKind kind = m.link(src, dst);
      std::string cell = kind == LinkKind::same_gpu ? std::string("same GPU") : std::string(to_string(kind));
      if (src != dst && m.peer_enabled(src, dst)) {
        cell += '*';
      }
      std::printf(" %-13s", cell.c_str());
    }
    std::printf("\n");
  }
}

void print_footer(const MultiGpuManager& m) {
  const Options& o = m.options();
  std::printf("\nNCCL: %s\n", m.nccl_available()
                                  ? ("available, version " + nccl_version_string(m.nccl_version())).c_str()
                                  : m.nccl_status().c_str());
  std::printf(
      "options: peer access %s, pool limit %s, chunk %s, host threads %u, numa %s, capture kernels %s, "
      "simulated devices %zu\n",
      o.enable_peer_access ? "on" : "off", format_bytes(o.pool_limit_bytes).c_str(),
      format_bytes(o.chunk_bytes).c_str(), o.host_threads, std::string(to_string(o.numa)).c_str(),
      o.capture_copy_kernels ? "on" : "off", o.simulated_devices);
}

}  // namespace

int run_topo(const TopoArgs& args) {
  const auto manager = open_manager();
  if (args.json) {
    std::cout << topo_json(*manager).dump(2) << '\n';
    return 0;
  }
  std::printf("gpuxfer %s\n", version_string);
  if (manager->device_count() == 0) {
    std::printf("0 devices (%s)\n", no_device_reason(*manager).c_str());
  } else {
    print_devices(*manager);
    print_links(*manager);
  }
  print_footer(*manager);
  return 0;
}

}  // namespace gpuxfer::cli
