// The root's arena of reused shared segments without a GPU: which entry a call takes (the smallest free
// one that fits, else a new one) and which free ones are released to keep the cache small; and which of a
// rank's mappings of the root's segments makes room for a new one (never one a queued copy still uses).
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "hostops/segment_arena.hpp"

namespace gpuxfer {
namespace {

using detail::ArenaSlot;
using detail::choose_segment;
using Indices = std::vector<std::size_t>;

TEST(SegmentArena, AnEmptyArenaMakesANewEntry) {
  const auto choice = choose_segment({}, 100, 3);
  EXPECT_FALSE(choice.reuse);
  EXPECT_TRUE(choice.evict.empty());
}

TEST(SegmentArena, ReusesTheSmallestFreeEntryThatFits) {
  const std::vector<ArenaSlot> slots{{8192, true, 1}, {4096, true, 2}, {2048, true, 3}, {4096, false, 4}};
  const auto choice = choose_segment(slots, 3000, 4);
  ASSERT_TRUE(choice.reuse);
  EXPECT_EQ(*choice.reuse, 1u) << "4096 fits 3000 and is the smallest free that does; 2048 is too small";
  EXPECT_TRUE(choice.evict.empty());
  const auto exact = choose_segment(slots, 2048, 4);
  ASSERT_TRUE(exact.reuse);
  EXPECT_EQ(*exact.reuse, 2u);
}

TEST(SegmentArena, OfEqualCapacitiesTheLeastRecentlyUsed) {
  const std::vector<ArenaSlot> slots{{4096, true, 9}, {4096, true, 5}, {4096, true, 7}};
  const auto choice = choose_segment(slots, 1, 3);
  ASSERT_TRUE(choice.reuse);
  EXPECT_EQ(*choice.reuse, 1u);
}

TEST(SegmentArena, ANewEntryWhenEveryFittingOneIsBusyOrAllAreTooSmall) {
  const std::vector<ArenaSlot> busy{{8192, false, 1}, {4096, false, 2}};
  EXPECT_FALSE(choose_segment(busy, 100, 3).reuse) << "results still hold both";
  const std::vector<ArenaSlot> small{{4096, true, 1}, {8192, false, 2}};
  const auto choice = choose_segment(small, 5000, 3);
  EXPECT_FALSE(choice.reuse);
  EXPECT_TRUE(choice.evict.empty()) << "three entries with the new one: within the cap";
}

TEST(SegmentArena, ReleasesFreeEntriesBeyondTheCapLeastRecentlyUsedFirst) {
  // Three free entries too small and one busy: the new one makes five, two over a cap of three.
  const std::vector<ArenaSlot> slots{{4096, true, 30}, {4096, true, 10}, {8192, false, 5}, {2048, true, 20}};
  const auto choice = choose_segment(slots, 1 << 20, 3);
  EXPECT_FALSE(choice.reuse);
  EXPECT_EQ(choice.evict, (Indices{1, 3})) << "used at 10, then at 20; the one used at 30 stays";
}

TEST(SegmentArena, NeverReleasesBusyEntriesNorTheOneReused) {
  const std::vector<ArenaSlot> busy{{4096, false, 1}, {4096, false, 2}, {4096, false, 3}, {4096, false, 4}};
  const auto over = choose_segment(busy, 1, 3);
  EXPECT_FALSE(over.reuse);
  EXPECT_TRUE(over.evict.empty()) << "more than the cap remain while results hold them";
  // Reusing one of five (four free) keeps five entries: two free ones go, never the reused one.
  const std::vector<ArenaSlot> five{
      {4096, true, 1}, {4096, true, 2}, {8192, true, 3}, {4096, false, 4}, {16384, true, 5}};
  const auto reuse = choose_segment(five, 5000, 3);
  ASSERT_TRUE(reuse.reuse);
  EXPECT_EQ(*reuse.reuse, 2u);
  EXPECT_EQ(reuse.evict, (Indices{0, 1}));
}

TEST(SegmentArena, ACapOfZeroReleasesEveryOtherFreeEntry) {
  const std::vector<ArenaSlot> slots{{4096, true, 2}, {4096, true, 1}};
  const auto choice = choose_segment(slots, 1, 0);
  ASSERT_TRUE(choice.reuse);
  EXPECT_EQ(*choice.reuse, 1u);
  EXPECT_EQ(choice.evict, (Indices{0}));
}

TEST(SegmentMappings, BelowTheCapNothingIsReleased) {
  const std::vector<ArenaSlot> two{{4096, true, 1}, {4096, true, 2}};
  EXPECT_FALSE(detail::choose_mapping_to_release(two, 3));
  EXPECT_FALSE(detail::choose_mapping_to_release({}, 3));
}

TEST(SegmentMappings, AtTheCapTheLeastRecentlyUsedIdleOneGoes) {
  const std::vector<ArenaSlot> three{{4096, true, 7}, {8192, true, 3}, {4096, true, 5}};
  EXPECT_EQ(detail::choose_mapping_to_release(three, 3), std::optional<std::size_t>{1});
}

TEST(SegmentMappings, AMappingAQueuedCopyStillUsesStays) {
  // The least recently used one is busy (a stream-ordered copy through it still queued): the next goes.
  const std::vector<ArenaSlot> slots{{4096, false, 1}, {4096, true, 4}, {4096, true, 2}};
  EXPECT_EQ(detail::choose_mapping_to_release(slots, 3), std::optional<std::size_t>{2});
  const std::vector<ArenaSlot> busy{{4096, false, 1}, {4096, false, 2}, {4096, false, 3}};
  EXPECT_FALSE(detail::choose_mapping_to_release(busy, 3)) << "all busy: the new one is kept beside them";
}

}  // namespace
}  // namespace gpuxfer
