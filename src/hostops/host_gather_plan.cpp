#include "hostops/host_gather_plan.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

#include <sys/stat.h>
#include <unistd.h>

#include <gpuxfer/error.hpp>

#include "hostops/shared_segment.hpp"

namespace gpuxfer::detail {
namespace {

std::string trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

// a + b, refusing a sum that does not fit.
std::size_t add(std::size_t a, std::size_t b, const std::string& what) {
  if (b > std::numeric_limits<std::size_t>::max() - a) {
    throw Error(Errc::invalid_argument, what + ": the sizes of the ranks add up to more than fits in memory");
  }
  return a + b;
}

std::size_t round_up(std::size_t bytes, std::size_t granule, const std::string& what) {
  return add(bytes, (granule - bytes % granule) % granule, what);
}

}  // namespace

NodeRecord make_node_record(std::string_view hostname, std::string_view boot_id, std::string_view shm_device,
                            std::uint64_t uid, std::uint64_t pid, std::uint64_t nonce, std::uint64_t page) {
  NodeRecord record;
  record.pid = pid;
  record.nonce = nonce;
  record.page = page;
  record.uid = uid;
  std::string identity = trimmed(hostname) + " boot " + trimmed(boot_id) + " shm " + trimmed(shm_device);
  if (trimmed(boot_id).empty() || trimmed(shm_device).empty() || identity.size() >= sizeof(record.identity)) {
    identity = "pid " + std::to_string(pid) + " of " + trimmed(hostname).substr(0, 64) + " (node unknown)";
  }
  std::memcpy(record.identity, identity.data(), std::min(identity.size(), sizeof(record.identity) - 1));
  return record;
}

std::optional<std::string> read_node_id(const EnvLookup& lookup) {
  auto value = lookup("GPUXFER_NODE_ID");
  if (!value) return std::nullopt;
  const bool printable = std::all_of(value->begin(), value->end(), [](char c) { return c > ' ' && c < 127; });
  if (value->empty() || value->size() > 128 || !printable) {
    throw Error(Errc::invalid_option, "GPUXFER_NODE_ID='" + *value +
                                          "': expected 1 to 128 printable characters without spaces (ranks "
                                          "with equal values on one host share a node)");
  }
  return value;
}

NodeRecord local_node_record(std::uint64_t nonce, const std::optional<std::string>& node_id) {
  std::string host;
  std::string boot_id;
  if (node_id) {
    // Built piece by piece: GCC 12 warns (-Wrestrict, wrongly) on assigning literals here.
    host.append("GPUXFER_NODE_ID=").append(*node_id);
    boot_id.push_back('-');
  } else {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';
    host = name;
    std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  }
  struct stat shm {};
  const std::string shm_device = ::stat("/dev/shm", &shm) == 0 ? std::to_string(shm.st_dev) : std::string();
  return make_node_record(host, boot_id, shm_device, ::getuid(), static_cast<std::uint64_t>(::getpid()),
                          nonce, page_size());
}

std::size_t gather_page(std::span<const NodeRecord> nodes, int root) noexcept {
  if (root < 0 || static_cast<std::size_t>(root) >= nodes.size() ||
      nodes[static_cast<std::size_t>(root)].page == 0)
    return page_size();
  return static_cast<std::size_t>(nodes[static_cast<std::size_t>(root)].page);
}

std::string identity_text(const NodeRecord& record) {
  return std::string(record.identity, strnlen(record.identity, sizeof(record.identity)));
}

std::vector<int> node_leaders(std::span<const NodeRecord> records) {
  std::vector<int> leaders(records.size());
  for (std::size_t r = 0; r < records.size(); ++r) {
    leaders[r] = static_cast<int>(r);
    for (std::size_t q = 0; q < r; ++q) {
      if (records[q].uid == records[r].uid &&
          std::memcmp(records[q].identity, records[r].identity, sizeof(records[r].identity)) == 0) {
        leaders[r] = leaders[q];
        break;
      }
    }
  }
  return leaders;
}

std::vector<HostRoute> host_routes(std::span<const int> leaders, int root, const std::string& what) {
  if (root < 0 || static_cast<std::size_t>(root) >= leaders.size()) {
    throw Error(Errc::invalid_argument, what + ": the root is out of range (ranks 0 to " +
                                            std::to_string(static_cast<long>(leaders.size()) - 1) + ")");
  }
  std::vector<HostRoute> route(leaders.size());
  for (std::size_t r = 0; r < leaders.size(); ++r) {
    if (static_cast<int>(r) == root) {
      route[r] = HostRoute::root;
    } else {
      route[r] = leaders[r] == leaders[static_cast<std::size_t>(root)] ? HostRoute::segment : HostRoute::network;
    }
  }
  return route;
}

std::size_t network_piece(std::uint64_t bytes) noexcept {
  constexpr std::uint64_t least = std::uint64_t{1} << 20;
  constexpr std::uint64_t most = std::uint64_t{16} << 20;
  const std::uint64_t eighth = (bytes / 8 + 255) / 256 * 256;
  return static_cast<std::size_t>(std::clamp(eighth, least, most));
}

HostGatherPlan plan_host_gather(std::span<const std::uint64_t> sizes, std::span<const int> leaders, int root,
                                std::size_t page) {
  const std::string what = "gather_to_host to rank " + std::to_string(root);
  if (sizes.size() != leaders.size()) {
    throw Error(Errc::invalid_argument, what + ": " + std::to_string(sizes.size()) + " sizes for " +
                                            std::to_string(leaders.size()) + " ranks");
  }
  if (page == 0) throw Error(Errc::invalid_argument, what + ": a page size of 0");
  constexpr std::size_t staging_granule = 256;
  HostGatherPlan plan;
  plan.route = host_routes(leaders, root, what);
  plan.offset.resize(sizes.size());
  plan.staging_offset.resize(sizes.size());
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    if (sizes[r] > std::numeric_limits<std::size_t>::max()) {
      throw Error(Errc::invalid_argument,
                  what + ": rank " + std::to_string(r) + "'s size does not fit in memory");
    }
    const auto bytes = static_cast<std::size_t>(sizes[r]);
    plan.offset[r] = plan.segment_bytes;
    if (bytes > 0) plan.segment_bytes = round_up(add(plan.segment_bytes, bytes, what), page, what);
    if (plan.route[r] == HostRoute::network) {
      plan.staging_offset[r] = plan.staging_bytes;
      if (bytes > 0)
        plan.staging_bytes = round_up(add(plan.staging_bytes, bytes, what), staging_granule, what);
    }
  }
  return plan;
}

HostBroadcastPlan plan_host_broadcast(std::uint64_t bytes, std::span<const std::uint64_t> capacities,
                                      std::span<const int> leaders, int root, const std::string& what) {
  if (capacities.size() != leaders.size()) {
    throw Error(Errc::invalid_argument, what + ": " + std::to_string(capacities.size()) + " capacities for " +
                                            std::to_string(leaders.size()) + " ranks");
  }
  HostBroadcastPlan plan;
  plan.route = host_routes(leaders, root, what);
  if (bytes > std::numeric_limits<std::size_t>::max()) {
    throw Error(Errc::invalid_argument, what + ": the root's size does not fit in memory");
  }
  std::string short_recvs;
  for (std::size_t r = 0; r < capacities.size(); ++r) {
    if (capacities[r] >= bytes) continue;
    short_recvs += (short_recvs.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " (" +
                   std::to_string(capacities[r]) + " bytes)";
  }
  if (!short_recvs.empty()) {
    throw Error(Errc::invalid_argument, what + ": the recv of " + short_recvs + " cannot take the root's " +
                                            std::to_string(bytes) + " bytes");
  }
  if (bytes == 0) return plan;
  for (const HostRoute route : plan.route) {
    if (route == HostRoute::segment) plan.segment_bytes = static_cast<std::size_t>(bytes);
    if (route == HostRoute::network) plan.network = true;
  }
  return plan;
}

bool offer_fits(const HostGatherPlan& plan, const RootOffer& offer) noexcept {
  return offer.segment != 0 && plan.segment_bytes <= offer.segment_bytes && plan.staging_bytes <= offer.staging_bytes;
}

}  // namespace gpuxfer::detail
