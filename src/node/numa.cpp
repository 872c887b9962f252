#include "node/numa.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>

namespace gpuxfer::detail {

int numa_node_of(const std::string& bus_id, const std::filesystem::path& sysfs) noexcept {
  try {
    std::string id = bus_id;
    std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
    // The runtime prints an 8-digit PCI domain ("00000000:1b:00.0"); sysfs uses 4 digits.
    if (const auto colon = id.find(':'); colon != std::string::npos && colon > 4) id.erase(0, colon - 4);
    std::ifstream in(sysfs / "bus/pci/devices" / id / "numa_node");
    int node = -1;
    if (in >> node && node >= 0) return node;
    // -1 from sysfs means "no affinity": on a host with one NUMA node that node is the answer.
    if (const std::vector<int> nodes = numa_nodes(sysfs); nodes.size() == 1) return nodes.front();
  } catch (...) {
  }
  return -1;
}

std::vector<int> numa_nodes(const std::filesystem::path& sysfs) noexcept {
  std::vector<int> nodes;
  try {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(sysfs / "devices/system/node", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.size() <= 4 || name.compare(0, 4, "node") != 0) continue;
      int id = -1;
      const auto [end, err] = std::from_chars(name.data() + 4, name.data() + name.size(), id);
      if (err == std::errc{} && end == name.data() + name.size()) nodes.push_back(id);
    }
    std::sort(nodes.begin(), nodes.end());
  } catch (...) {
    nodes.clear();
  }
  return nodes;
}

std::vector<int> cpus_of_node(int node, const std::filesystem::path& sysfs) noexcept {
  try {
    std::ifstream in(sysfs / "devices/system/node" / ("node" + std::to_string(node)) / "cpulist");
    std::string text;
    if (std::getline(in, text)) return parse_cpu_list(text);
  } catch (...) {
  }
  return {};
}

std::vector<int> parse_cpu_list(std::string_view text) noexcept {
  std::vector<int> cpus;
  try {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
    std::size_t at = 0;
    while (at < text.size()) {
      const std::size_t comma = std::min(text.find(',', at), text.size());
      const std::string_view item = text.substr(at, comma - at);
      const std::size_t dash = item.find('-');
      int first = 0;
      int last = 0;
      const auto parse = [](std::string_view s, int& out) {
        const auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), out);
        return err == std::errc{} && end == s.data() + s.size() && out >= 0;
      };
      if (dash == std::string_view::npos) {
        if (!parse(item, first)) return {};
        last = first;
      } else if (!parse(item.substr(0, dash), first) || !parse(item.substr(dash + 1), last) || last < first) {
        return {};
      }
      for (int c = first; c <= last; ++c) cpus.push_back(c);
      at = comma + 1;
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  } catch (...) {
    cpus.clear();
  }
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::ostringstream out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (i != 0) out << ',';
    out << cpus[i];
    if (j > i) out << '-' << cpus[j];
    i = j + 1;
  }
  return out.str();
}

std::vector<int> staging_nodes(const std::vector<int>& device_nodes, NumaPlacement placement,
                               std::size_t host_nodes) {
  const bool place = placement == NumaPlacement::on || (placement == NumaPlacement::automatic && host_nodes >= 2);
  std::vector<int> nodes(device_nodes.size(), -1);
  if (place) nodes = device_nodes;
  return nodes;
}

}  // namespace gpuxfer::detail
