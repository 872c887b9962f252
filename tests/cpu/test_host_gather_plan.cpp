// The host operations' decisions without a GPU: which ranks share a node (the node record and its
// comparison); for gather_to_host which way each rank's bytes take, where they land, and the sizes it
// refuses; for broadcast_from_host which ranks read the segment or take NCCL, and the recvs it refuses.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "common/expect_error.hpp"
#include "hostops/host_gather_plan.hpp"
#include "hostops/shared_segment.hpp"

namespace gpuxfer {
namespace {

using detail::HostRoute;
using detail::make_node_record;
using detail::NodeRecord;
using test::throws_error;

constexpr const char* boot = "0b5c3c3e-8f0e-4d4e-9a59-2d1f3c2b1a00";
constexpr std::uint64_t kUid = 1000;
constexpr std::uint64_t kPage = 4096;

TEST(HostGatherNodes, RecordsOfOneNodeAreEqualWhateverTheProcess) {
  const NodeRecord a = make_node_record("node7", boot, "64768", kUid, 100, 1, kPage);
  const NodeRecord b = make_node_record("node7\n", std::string(boot) + "\n", "64768", kUid, 200, 2, kPage);
  EXPECT_EQ(detail::identity_text(a), detail::identity_text(b));
  EXPECT_EQ(detail::identity_text(a), std::string("node7 boot ") + boot + " shm 64768");
  EXPECT_EQ(a.pid, 100u);
  EXPECT_EQ(a.page, kPage);
  EXPECT_EQ(b.nonce, 2u);
}

TEST(HostGatherNodes, AnotherBootHostOrShmIsAnotherNode) {
  const std::string a = detail::identity_text(make_node_record("node7", boot, "64768", kUid, 1, 1, kPage));
  EXPECT_NE(a, detail::identity_text(make_node_record("node8", boot, "64768", kUid, 1, 1, kPage)));
  EXPECT_NE(a, detail::identity_text(make_node_record("node7", "another-boot", "64768", kUid, 1, 1, kPage)));
  EXPECT_NE(a, detail::identity_text(make_node_record("node7", boot, "64769", kUid, 1, 1, kPage)));
}

// Containers of one host sharing its /dev/shm under other users cannot open each other's segments (made
// 0600): another node each, whose parts travel over NCCL.
TEST(HostGatherNodes, AnotherUserIsAnotherNode) {
  const NodeRecord a = make_node_record("node7", boot, "64768", 1000, 1, 1, kPage);
  const NodeRecord b = make_node_record("node7", boot, "64768", 1001, 2, 1, kPage);
  EXPECT_EQ(detail::identity_text(a), detail::identity_text(b)) << "one host";
  EXPECT_EQ(b.uid, 1001u);
  const std::vector<NodeRecord> records{a, b, make_node_record("node7", boot, "64768", 1000, 3, 1, kPage)};
  EXPECT_EQ(detail::node_leaders(records), (std::vector<int>{0, 1, 0}));
}

TEST(HostGatherNodes, AnUnknownNodeIsThisProcessAlone) {
  const NodeRecord no_boot_1 = make_node_record("node7", "", "64768", kUid, 1, 1, kPage);
  const NodeRecord no_boot_2 = make_node_record("node7", "", "64768", kUid, 2, 1, kPage);
  EXPECT_NE(detail::identity_text(no_boot_1), detail::identity_text(no_boot_2));
  EXPECT_NE(detail::identity_text(no_boot_1).find("node unknown"), std::string::npos);
  const NodeRecord no_shm = make_node_record("node7", boot, "", kUid, 1, 1, kPage);
  EXPECT_NE(detail::identity_text(no_shm).find("pid 1 "), std::string::npos);
  // An identity that would not fit the record is not cut short (two long names could then meet).
  const NodeRecord long_1 = make_node_record(std::string(300, 'h'), boot, "1", kUid, 1, 1, kPage);
  const NodeRecord long_2 = make_node_record(std::string(300, 'h'), boot, "1", kUid, 2, 1, kPage);
  EXPECT_NE(detail::identity_text(long_1), detail::identity_text(long_2));
}

TEST(HostGatherNodes, ThisProcessHasAKnownNode) {
  const NodeRecord here = detail::local_node_record(5, std::nullopt);
  EXPECT_EQ(here.pid, static_cast<std::uint64_t>(::getpid()));
  EXPECT_EQ(here.nonce, 5u);
  EXPECT_EQ(here.page, detail::page_size());
  EXPECT_EQ(here.uid, static_cast<std::uint64_t>(::getuid()));
  EXPECT_EQ(detail::identity_text(here), detail::identity_text(detail::local_node_record(6, std::nullopt)));
  EXPECT_NE(detail::identity_text(here).find(" boot "), std::string::npos) << detail::identity_text(here);
}

TEST(HostGatherNodes, ANodeIdStandsForTheHost) {
  const auto a = detail::identity_text(detail::local_node_record(1, std::string("a")));
  EXPECT_NE(a.find("GPUXFER_NODE_ID=a "), std::string::npos) << a;
  EXPECT_EQ(a, detail::identity_text(detail::local_node_record(2, std::string("a"))));
  EXPECT_NE(a, detail::identity_text(detail::local_node_record(1, std::string("b"))));
  EXPECT_NE(a, detail::identity_text(detail::local_node_record(1, std::nullopt)));
}

TEST(HostGatherNodes, ReadsAndChecksTheNodeId) {
  const auto lookup_of = [](std::optional<std::string> value) {
    return [value](std::string_view name) { return name == "GPUXFER_NODE_ID" ? value : std::nullopt; };
  };
  EXPECT_EQ(detail::read_node_id(lookup_of(std::nullopt)), std::nullopt);
  EXPECT_EQ(detail::read_node_id(lookup_of("rack4-node2")), "rack4-node2");
  EXPECT_EQ(detail::read_node_id(lookup_of(std::string(128, 'x'))), std::string(128, 'x'));
  EXPECT_TRUE(throws_error([&] { (void)detail::read_node_id(lookup_of("")); }, Errc::invalid_option,
                           "GPUXFER_NODE_ID=''", "1 to 128 printable"));
  EXPECT_TRUE(throws_error([&] { (void)detail::read_node_id(lookup_of(std::string(129, 'x'))); },
                           Errc::invalid_option, "GPUXFER_NODE_ID='xxx"));
  EXPECT_TRUE(throws_error([&] { (void)detail::read_node_id(lookup_of("two words")); }, Errc::invalid_option,
                           "GPUXFER_NODE_ID='two words'"));
}

TEST(HostGatherNodes, LeadersAreEachNodesFirstRank) {
  const NodeRecord a = make_node_record("a", boot, "1", kUid, 1, 1, kPage);
  const NodeRecord b = make_node_record("b", boot, "1", kUid, 2, 1, kPage);
  const NodeRecord c = make_node_record("c", boot, "1", kUid, 3, 1, kPage);
  const std::vector<NodeRecord> records{b, a, b, c, a};
  EXPECT_EQ(detail::node_leaders(records), (std::vector<int>{0, 1, 0, 3, 1}));
  EXPECT_EQ(detail::node_leaders(std::vector<NodeRecord>{a}), (std::vector<int>{0}));
}

TEST(HostGatherPlan, EveryRankWithBytesTakesPagesOfTheSegmentInRankOrder) {
  const std::size_t page = 4096;
  // Ranks 0 to 2 on node 0, ranks 3 and 4 on node 3; the root is rank 1.
  const std::vector<std::uint64_t> sizes{5000, 10, 0, 300, 7};
  const std::vector<int> leaders{0, 0, 0, 3, 3};
  const auto plan = detail::plan_host_gather(sizes, leaders, 1, page);
  EXPECT_EQ(plan.route, (std::vector<HostRoute>{HostRoute::segment, HostRoute::root, HostRoute::segment,
                                                HostRoute::network, HostRoute::network}));
  // The root's results view the segment: the root's part and other nodes' parts have pages there too.
  EXPECT_EQ(plan.offset, (std::vector<std::size_t>{0, 2 * page, 3 * page, 3 * page, 4 * page}))
      << "rank 0 takes two pages; rank 2 sends nothing, so takes none";
  EXPECT_EQ(plan.segment_bytes, 5 * page);
  // Other nodes' parts land in the device staging first, packed at 256 bytes.
  EXPECT_EQ(plan.staging_offset, (std::vector<std::size_t>{0, 0, 0, 0, 512}))
      << "300 bytes rounded to the staging's 256-byte granule";
  EXPECT_EQ(plan.staging_bytes, 768u);
}

TEST(HostGatherPlan, NoStagingWithoutOtherNodesAndNoSegmentWithoutBytes) {
  const std::size_t page = 4096;
  const std::vector<std::uint64_t> sizes{0, 9, 0, 4};
  const auto plan = detail::plan_host_gather(sizes, std::vector<int>{0, 0, 2, 2}, 1, page);
  EXPECT_EQ(plan.offset, (std::vector<std::size_t>{0, 0, page, page}));
  EXPECT_EQ(plan.segment_bytes, 2 * page);
  EXPECT_EQ(plan.staging_bytes, 256u);
  const auto one = detail::plan_host_gather(std::vector<std::uint64_t>{42}, std::vector<int>{0}, 0, page);
  EXPECT_EQ(one.route, (std::vector<HostRoute>{HostRoute::root}));
  EXPECT_EQ(one.segment_bytes, page) << "the root alone still gathers into a segment";
  EXPECT_EQ(one.staging_bytes, 0u);
  const auto none =
      detail::plan_host_gather(std::vector<std::uint64_t>{0, 0, 0}, std::vector<int>{0, 0, 2}, 0, page);
  EXPECT_EQ(none.segment_bytes + none.staging_bytes, 0u);
}

// The pieces between nodes: an eighth of the part, within [1 MiB, 16 MiB], a multiple of 256 bytes.
TEST(HostGatherPlan, NetworkPiecesAreAnEighthBetweenOneAndSixteenMiB) {
  using detail::network_piece;
  constexpr std::size_t mib = std::size_t{1} << 20;
  EXPECT_EQ(network_piece(0), mib);
  EXPECT_EQ(network_piece(4099), mib);
  EXPECT_EQ(network_piece(mib + 7), mib);  // two pieces: 1 MiB and 7 bytes
  EXPECT_EQ(network_piece(64 * mib), 8 * mib);
  EXPECT_EQ(network_piece(64 * mib + 8 * 300), 8 * mib + 512);  // 8 MiB + 300, rounded up to 256
  EXPECT_EQ(network_piece(256 * mib), 16 * mib);
  EXPECT_EQ(network_piece(std::uint64_t{1} << 40), 16 * mib);
}

TEST(HostGatherPlan, RefusesABadRootMismatchedSpansAndSizesThatDoNotFit) {
  const std::vector<std::uint64_t> sizes{1, 2};
  const std::vector<int> leaders{0, 0};
  EXPECT_TRUE(throws_error([&] { (void)detail::plan_host_gather(sizes, leaders, 2, 4096); },
                           Errc::invalid_argument, "root is out of range", "ranks 0 to 1"));
  EXPECT_TRUE(throws_error([&] { (void)detail::plan_host_gather(sizes, leaders, -1, 4096); },
                           Errc::invalid_argument, "root is out of range"));
  EXPECT_TRUE(throws_error([&] { (void)detail::plan_host_gather(sizes, std::vector<int>{0}, 0, 4096); },
                           Errc::invalid_argument, "2 sizes for 1 ranks"));
  const std::uint64_t huge = std::numeric_limits<std::uint64_t>::max() - 10;
  EXPECT_TRUE(throws_error(
      [&] {
        (void)detail::plan_host_gather(std::vector<std::uint64_t>{0, huge, huge}, std::vector<int>{0, 0, 0},
                                       0, 4096);
      },
      Errc::invalid_argument, "more than fits in memory"));
  EXPECT_TRUE(throws_error(
      [&] {
        (void)detail::plan_host_gather(std::vector<std::uint64_t>{0, huge, huge}, std::vector<int>{0, 1, 2},
                                       0, 4096);
      },
      Errc::invalid_argument, "more than fits in memory"));
}

TEST(HostGatherPlan, AnOfferFitsWhenItsSegmentAndStagingHoldThePlan) {
  // Two ranks on the root's node and one on another: 3 parts of pages, one of them staged.
  const std::vector<int> leaders{0, 0, 2};
  const std::vector<std::uint64_t> sizes{4096, 100, 5000};
  const auto plan = detail::plan_host_gather(sizes, leaders, 0, 4096);
  ASSERT_EQ(plan.segment_bytes, 4096u + 4096u + 8192u);
  ASSERT_EQ(plan.staging_bytes, 5120u);
  EXPECT_TRUE(detail::offer_fits(plan, {1, 16384, 5120})) << "segment id 0, exactly large enough";
  EXPECT_TRUE(detail::offer_fits(plan, {8, 1 << 20, 1 << 20}));
  EXPECT_FALSE(detail::offer_fits(plan, {0, 1 << 20, 1 << 20})) << "no segment set aside";
  EXPECT_FALSE(detail::offer_fits(plan, {1, 16383, 5120})) << "one byte short of the segment";
  EXPECT_FALSE(detail::offer_fits(plan, {1, 16384, 5119})) << "the staging one byte short";
  const auto local = detail::plan_host_gather(sizes, std::vector<int>{0, 0, 0}, 0, 4096);
  EXPECT_TRUE(detail::offer_fits(local, {1, 16384, 0})) << "nothing over NCCL: no staging needed";
}

// The root on a node of 4 KiB pages, rank 1 on one of 64 KiB (an x86 and an aarch64 node): both plan with
// the root's page, so that both find the root's offer of a reused segment fitting, or neither. With its own
// page rank 1 needed 128 KiB of a segment of 8 KiB and waited for a "ready" the root never sent.
TEST(HostGatherPlan, RanksOfNodesWithOtherPageSizesPlanWithTheRootsPage) {
  const std::vector<NodeRecord> nodes{make_node_record("x86", boot, "1", kUid, 1, 1, 4096),
                                      make_node_record("arm", boot, "1", kUid, 2, 1, 65536)};
  const std::vector<int> leaders = detail::node_leaders(nodes);
  ASSERT_EQ(leaders, (std::vector<int>{0, 1}));
  EXPECT_EQ(detail::gather_page(nodes, 0), 4096u);
  EXPECT_EQ(detail::gather_page(nodes, 1), 65536u);
  const std::vector<std::uint64_t> sizes{4096, 4096};
  const auto plan = detail::plan_host_gather(sizes, leaders, 0, detail::gather_page(nodes, 0));
  EXPECT_EQ(plan.segment_bytes, 8192u);
  const detail::RootOffer offer{1, plan.segment_bytes, plan.staging_bytes};  // the root's, of its last call
  EXPECT_TRUE(detail::offer_fits(plan, offer));
  EXPECT_FALSE(detail::offer_fits(detail::plan_host_gather(sizes, leaders, 0, 65536), offer))
      << "with rank 1's own page the same offer does not fit: the two would make different exchanges";
  // A record without a page (none) falls back on this process's.
  const std::vector<NodeRecord> unknown{NodeRecord{}};
  EXPECT_EQ(detail::gather_page(unknown, 0), detail::page_size());
  EXPECT_EQ(detail::gather_page(unknown, 3), detail::page_size());
}

TEST(HostRoutes, TheRootsNodeTakesTheSegmentOtherNodesTheNetwork) {
  const std::vector<int> leaders{0, 0, 2, 2, 0};
  EXPECT_EQ(detail::host_routes(leaders, 4, "op"),
            (std::vector<HostRoute>{HostRoute::segment, HostRoute::segment, HostRoute::network, HostRoute::network,
                                    HostRoute::root}));
  EXPECT_EQ(detail::host_routes(leaders, 3, "op"),
            (std::vector<HostRoute>{HostRoute::network, HostRoute::network, HostRoute::segment, HostRoute::root,
                                    HostRoute::network}));
  EXPECT_TRUE(throws_error([&] { (void)detail::host_routes(leaders, 5, "op"); }, Errc::invalid_argument,
                           "op: the root is out of range (ranks 0 to 4)"));
}

TEST(HostBroadcastPlan, TheRootsNodeReadsTheSegmentOtherNodesTakeNccl) {
  // Ranks 0 to 2 on node 0, ranks 3 and 4 on node 3.
  const std::vector<int> leaders{0, 0, 0, 3, 3};
  const std::vector<std::uint64_t> capacities{4099, 5000, 4099, 4099, 1 << 20};
  const auto plan = detail::plan_host_broadcast(4099, capacities, leaders, 1, "op");
  EXPECT_EQ(plan.route, (std::vector<HostRoute>{HostRoute::segment, HostRoute::root, HostRoute::segment,
                                                HostRoute::network, HostRoute::network}));
  EXPECT_EQ(plan.segment_bytes, 4099u);  // one copy of the bytes, read by every rank of the node
  EXPECT_TRUE(plan.network);
  const auto from_other_node = detail::plan_host_broadcast(7, capacities, leaders, 4, "op");
  EXPECT_EQ(from_other_node.segment_bytes, 7u);  // rank 3 shares the root's node
  EXPECT_TRUE(from_other_node.network);
}

TEST(HostBroadcastPlan, NoSegmentWithoutOtherRanksOnTheRootsNodeNorForNoBytes) {
  const auto alone = detail::plan_host_broadcast(10, std::vector<std::uint64_t>{10, 10}, std::vector<int>{0, 1},
                                                 0, "op");
  EXPECT_EQ(alone.segment_bytes, 0u);
  EXPECT_TRUE(alone.network);
  const auto one = detail::plan_host_broadcast(10, std::vector<std::uint64_t>{10}, std::vector<int>{0}, 0, "op");
  EXPECT_EQ(one.route, (std::vector<HostRoute>{HostRoute::root}));
  EXPECT_EQ(one.segment_bytes, 0u);
  EXPECT_FALSE(one.network);
  const auto none = detail::plan_host_broadcast(0, std::vector<std::uint64_t>{0, 0, 0}, std::vector<int>{0, 0, 2},
                                                0, "op");
  EXPECT_EQ(none.segment_bytes, 0u);
  EXPECT_FALSE(none.network);
}

TEST(HostBroadcastPlan, RefusesRecvsTooSmallNamingEachAndABadRootOrSpans) {
  const std::vector<int> leaders{0, 0, 2};
  EXPECT_TRUE(throws_error(
      [&] { (void)detail::plan_host_broadcast(100, std::vector<std::uint64_t>{99, 100, 0}, leaders, 1, "op"); },
      Errc::invalid_argument, "op: the recv of rank 0 (99 bytes), rank 2 (0 bytes) cannot take the root's 100 bytes"));
  // The root's own recv counts too.
  EXPECT_TRUE(throws_error(
      [&] { (void)detail::plan_host_broadcast(100, std::vector<std::uint64_t>{100, 1, 100}, leaders, 1, "op"); },
      Errc::invalid_argument, "rank 1 (1 bytes)"));
  EXPECT_TRUE(throws_error(
      [&] { (void)detail::plan_host_broadcast(1, std::vector<std::uint64_t>{1, 1, 1}, leaders, 3, "op"); },
      Errc::invalid_argument, "root is out of range"));
  EXPECT_TRUE(throws_error(
      [&] { (void)detail::plan_host_broadcast(1, std::vector<std::uint64_t>{1, 1}, leaders, 0, "op"); },
      Errc::invalid_argument, "2 capacities for 3 ranks"));
}

}  // namespace
}  // namespace gpuxfer
