// What the host operations decide without a GPU: which ranks share a node (a fixed-size record that every
// rank sends once, compared byte for byte), which way each rank's bytes take between the root's host and
// its GPU (the root's node's shared segment or NCCL with the root's GPU), and, for gather_to_host, where
// they land in the segment or the root's device staging; for broadcast_from_host, the recvs too small.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <gpuxfer/options.hpp>

namespace gpuxfer::detail {

/// One rank's node and process, as every rank sends it (NCCL all-gather of raw bytes: fixed size, no
/// pointers). Two ranks share a node when their identities are equal: the host name, the kernel's boot id
/// and the device of the /dev/shm mount, so that two containers of one host with separate /dev/shm count
/// as two nodes (their ranks then go through NCCL, which is always correct).
struct NodeRecord {
  char identity[224] = {};  ///< the host: the host name, its boot and its /dev/shm
  std::uint64_t uid = 0;    ///< the user: the shared segments are the user's alone
  std::uint64_t pid = 0;    ///< the process, part of the shared segments' names
  std::uint64_t nonce = 0;  ///< random, one per communicator: the names stay unique across pid namespaces
  std::uint64_t page = 0;   ///< the node's page size: the root's rounds every rank's plan of its segment
};
static_assert(sizeof(NodeRecord) == 256);

/// The record of the given parts. An identity that does not fit, or an empty @p boot_id or @p shm_device
/// (unreadable), becomes unique to the process ("pid <pid>"), so that such a rank shares no node.
[[nodiscard]] NodeRecord make_node_record(std::string_view hostname, std::string_view boot_id,
                                          std::string_view shm_device, std::uint64_t uid, std::uint64_t pid,
                                          std::uint64_t nonce, std::uint64_t page);

/// GPUXFER_NODE_ID through @p lookup: nullopt when unset.
/// @throws Error(Errc::invalid_option) for an empty value, one over 128 characters or one with a
///         character outside ASCII's printable ones (naming the variable and its value)
[[nodiscard]] std::optional<std::string> read_node_id(const EnvLookup& lookup);

/// This process's record: gethostname, /proc/sys/kernel/random/boot_id, stat("/dev/shm").st_dev, getuid,
/// getpid, page_size().
/// A @p node_id (GPUXFER_NODE_ID) stands for the host name and boot id: ranks of one host that set
/// different ones count as different nodes (how a test on one machine takes the path between nodes);
/// the /dev/shm device still counts, so equal ids never join two mounts.
[[nodiscard]] NodeRecord local_node_record(std::uint64_t nonce, const std::optional<std::string>& node_id);

/// The identity as text (for messages).
[[nodiscard]] std::string identity_text(const NodeRecord& record);

/// For every rank, the lowest rank with the same identity and user (its node's first rank): the shared
/// segments are made for their user alone, so processes of other users on one host (containers sharing
/// its /dev/shm) count as other nodes, whose parts travel over NCCL.
[[nodiscard]] std::vector<int> node_leaders(std::span<const NodeRecord> records);

enum class HostRoute {
  root,     ///< the root itself: a copy between its GPU and its own host memory
  segment,  ///< a rank of the root's node: a copy between its GPU and the root's shared segment
  network,  ///< a rank of another node: NCCL between its GPU and the root's GPU
};

/// Every rank's route to or from @p root's host, @p leaders as node_leaders gives them; @p what names the
/// operation in messages.
/// @throws Error(Errc::invalid_argument) for a root out of range
[[nodiscard]] std::vector<HostRoute> host_routes(std::span<const int> leaders, int root, const std::string& what);

struct HostGatherPlan {
  std::vector<HostRoute> route;  ///< per rank
  /// Per rank: where its part lands in the root's segment, whatever its route (the root's results view
  /// the segment); a rank without bytes takes no room there.
  std::vector<std::size_t> offset;
  /// Per rank: where a rank of another node (network) lands in the root's device staging; 0 for the others.
  std::vector<std::size_t> staging_offset;
  std::size_t segment_bytes = 0;  ///< 0: no rank sends bytes
  std::size_t staging_bytes = 0;  ///< 0: nothing goes over NCCL
};

/// The pieces a part of @p bytes travels in between nodes (NCCL to the root's GPU, then down to its host):
/// an eighth of it, at least 1 MiB and at most 16 MiB, a multiple of 256 bytes. Both ends compute it from the
/// exchanged size, so that the sender's sends and the root's receives pair up, and the root takes piece k
/// down while NCCL moves piece k + 1.
[[nodiscard]] std::size_t network_piece(std::uint64_t bytes) noexcept;

/// The page that every rank's plan of a gather to @p root rounds to: the root's node's (each rank
/// deciding with its own, ranks of nodes with other page sizes would disagree on whether the root's
/// offer fits, and so on the exchanges to make). This process's page_size() for a record without one.
[[nodiscard]] std::size_t gather_page(std::span<const NodeRecord> nodes, int root) noexcept;

/// The plan for ranks sending @p sizes (bytes per rank) to @p root, @p leaders as node_leaders gives them.
/// Every rank's part of the segment, in rank order, starts on a multiple of @p page (so that a HostBuffer
/// viewing it starts on a page too); staging parts are packed at multiples of 256 bytes.
/// @throws Error(Errc::invalid_argument) for a root out of range, mismatched spans, or sizes whose sum
///         does not fit in memory
[[nodiscard]] HostGatherPlan plan_host_gather(std::span<const std::uint64_t> sizes,
                                              std::span<const int> leaders, int root, std::size_t page);

/// What gather_to_host's root offers in the call's first exchange, before it knows the other ranks' sizes:
/// a free segment of its arena set aside (one an earlier call made) and its device staging as it is.
struct RootOffer {
  std::uint64_t segment = 0;  ///< the segment's id + 1; 0: none set aside
  std::uint64_t segment_bytes = 0;
  std::uint64_t staging_bytes = 0;
};

/// Whether @p plan fits @p offer, so that the call needs no "ready" exchange: the segment set aside holds
/// every part and the staging every part from another node. Every rank decides it alike from the words
/// exchanged.
[[nodiscard]] bool offer_fits(const HostGatherPlan& plan, const RootOffer& offer) noexcept;

struct HostBroadcastPlan {
  std::vector<HostRoute> route;   ///< per rank
  std::size_t segment_bytes = 0;  ///< the root's bytes, or 0: no rank of the root's node but the root takes them
  bool network = false;           ///< whether a rank of another node takes bytes (over NCCL from the root's GPU)
};

/// The plan for @p root's @p bytes into every rank's recv of @p capacities (bytes per rank), @p leaders as
/// node_leaders gives them; @p what names the operation in messages. No segment and no network for 0 bytes.
/// @throws Error(Errc::invalid_argument) for a root out of range, mismatched spans, a size that does not fit
///         in memory, or recvs smaller than @p bytes (naming every such rank and its capacity)
[[nodiscard]] HostBroadcastPlan plan_host_broadcast(std::uint64_t bytes, std::span<const std::uint64_t> capacities,
                                                    std::span<const int> leaders, int root, const std::string& what);

}  // namespace gpuxfer::detail
