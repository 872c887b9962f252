// copy_blocks' plan without a GPU: layouts resolved and refused, pairs checked and merged into runs, runs
// cut into copies, and the path chosen.
#include <cstdint>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/expect_error.hpp"
#include "ops/block_plan.hpp"

namespace gpuxfer {
namespace {

using detail::BlockGeometry;
using detail::BlockRun;

std::byte region[1];  // a base that is not null; the plan never dereferences it

BlockLayout side(std::size_t blocks, std::size_t block_stride = 0, std::size_t layer_stride = 0) {
  return {region, blocks, block_stride, layer_stride};
}

TEST(BlockPlan, PackedLayoutByDefault) {
  const BlockGeometry g = detail::resolve_layout(side(10), 4096, 3, true, "destination");
  EXPECT_EQ(g.block_stride, 3u * 4096);
  EXPECT_EQ(g.layer_stride, 4096u);
  EXPECT_EQ(g.extent, 10u * 3 * 4096);
}

TEST(BlockPlan, LayersOutsideBlocksAndOddStrides) {
  // [layer][block][bytes], blocks 4099 bytes apart: every piece apart.
  const BlockGeometry g = detail::resolve_layout(side(8, 4099, 8 * 4099), 4097, 2, true, "destination");
  EXPECT_EQ(g.extent, 7u * 4099 + 8 * 4099 + 4097);
}

TEST(BlockPlan, OverlappingDestinationPiecesAreRefused) {
  EXPECT_TRUE(
      test::throws_error([] { (void)detail::resolve_layout(side(4, 100), 4096, 1, true, "destination"); },
                         Errc::invalid_argument, "destination", "overlap"));
  EXPECT_TRUE(test::throws_error(
      [] { (void)detail::resolve_layout(side(4, 8192, 100), 4096, 2, true, "destination"); },
      Errc::invalid_argument, "overlap"));
  // A source may overlap itself: it is only read.
  EXPECT_NO_THROW((void)detail::resolve_layout(side(4, 100), 4096, 1, false, "source"));
}

TEST(BlockPlan, OverflowingLayoutIsRefused) {
  EXPECT_TRUE(test::throws_error(
      [] { (void)detail::resolve_layout(side(SIZE_MAX / 2, 4096), 4096, 1, false, "source"); },
      Errc::invalid_argument, "overflows"));
}

TEST(BlockPlan, PairsOutOfRangeNameThePair) {
  const std::vector<std::int64_t> pairs{0, 0, 1, 1, 5, 2};
  EXPECT_TRUE(test::throws_error([&] { (void)detail::plan_block_runs(pairs, 5, 10); }, Errc::invalid_argument,
                                 "pair 2", "(5, 2)", "source", "nothing was copied"));
  const std::vector<std::int64_t> negative{0, -1};
  EXPECT_TRUE(test::throws_error([&] { (void)detail::plan_block_runs(negative, 5, 10); },
                                 Errc::invalid_argument, "pair 0", "destination"));
}

TEST(BlockPlan, TwoWritersOfOneBlockAreRefused) {
  const std::vector<std::int64_t> pairs{0, 3, 1, 4, 2, 3};
  EXPECT_TRUE(test::throws_error([&] { (void)detail::plan_block_runs(pairs, 5, 10); }, Errc::invalid_argument,
                                 "pair 2", "earlier pair"));
  // Reading one source block twice is fine.
  const std::vector<std::int64_t> reads{0, 3, 0, 4};
  EXPECT_EQ(detail::plan_block_runs(reads, 5, 10).size(), 2u);
  // A destination too large for the bitmap takes the sort.
  EXPECT_TRUE(test::throws_error([&] { (void)detail::plan_block_runs(pairs, 5, std::size_t{1} << 40); },
                                 Errc::invalid_argument, "another pair"));
}

TEST(BlockPlan, ConsecutivePairsMerge) {
  std::vector<std::int64_t> pairs;
  for (std::int64_t k = 0; k < 100; ++k) pairs.insert(pairs.end(), {k + 10, k});
  pairs.insert(pairs.end(), {7, 500});
  const auto runs = detail::plan_block_runs(pairs, 1000, 1000);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].src, 10u);
  EXPECT_EQ(runs[0].blocks, 100u);
  EXPECT_EQ(runs[1].blocks, 1u);
}

TEST(BlockPlan, ShuffledConsecutivePairsMergeInDestinationOrder) {
  const std::vector<std::int64_t> pairs{1, 11, 0, 10, 2, 12};
  EXPECT_EQ(detail::plan_block_runs(pairs, 3, 13).size(), 3u);
  const auto runs = detail::runs_in_destination_order(detail::plan_block_runs(pairs, 3, 13), 13);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].blocks, 3u);
  // A destination far larger than the pairs is sorted, not indexed: the same runs.
  const auto sparse = detail::runs_in_destination_order(
      detail::plan_block_runs(pairs, 3, std::size_t{1} << 40), std::size_t{1} << 40);
  ASSERT_EQ(sparse.size(), 1u);
  EXPECT_EQ(sparse[0].src, 0u);
  EXPECT_EQ(sparse[0].dst, 10u);
}

// Runs that merged in the given order merge again in destination order, whole.
TEST(BlockPlan, MergedRunsMergeAgainInDestinationOrder) {
  const std::vector<std::int64_t> pairs{13, 23, 14, 24, 10, 20, 11, 21, 12, 22};
  const auto given = detail::plan_block_runs(pairs, 15, 25);
  ASSERT_EQ(given.size(), 2u);
  EXPECT_EQ(given[0].blocks, 2u);
  const auto runs = detail::runs_in_destination_order(given, 25);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].src, 10u);
  EXPECT_EQ(runs[0].dst, 20u);
  EXPECT_EQ(runs[0].blocks, 5u);
}

// Shuffled pairs of shuffled runs: in destination order every run comes back whole, each pair once.
TEST(BlockPlan, ShuffledRunsComeBackWhole) {
  std::vector<std::int64_t> pairs;
  for (std::int64_t run = 0; run < 50; ++run) {
    for (std::int64_t k = 0; k < 7; ++k) pairs.insert(pairs.end(), {run * 11 + k, 1000 - run * 9 + k});
  }
  std::vector<std::size_t> order(pairs.size() / 2);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
  std::vector<std::int64_t> shuffled;
  for (const std::size_t i : order) shuffled.insert(shuffled.end(), {pairs[2 * i], pairs[2 * i + 1]});
  for (const std::size_t dst_blocks : {std::size_t{1100}, std::size_t{1} << 30}) {
    const auto runs =
        detail::runs_in_destination_order(detail::plan_block_runs(shuffled, 600, dst_blocks), dst_blocks);
    ASSERT_EQ(runs.size(), 50u) << dst_blocks;
    for (std::size_t r = 0; r < runs.size(); ++r) {
      const std::size_t run = 49 - r;  // destination order: the last run lies lowest
      EXPECT_EQ(runs[r].src, run * 11) << r;
      EXPECT_EQ(runs[r].dst, 1000 - run * 9) << r;
      EXPECT_EQ(runs[r].blocks, 7u) << r;
    }
  }
}

// Destination order is taken where it merges at least one run in 64: not for the run or two that a
// shuffle of 1024 random pairs merges by chance, whose cost is building every piece again.
TEST(BlockPlan, DestinationOrderPaysForMerges) {
  EXPECT_FALSE(detail::destination_order_pays(1024, 1024));
  EXPECT_FALSE(detail::destination_order_pays(1024, 1023));
  EXPECT_FALSE(detail::destination_order_pays(1024, 1009));
  EXPECT_TRUE(detail::destination_order_pays(1024, 1008));  // 16 of 1024 merged
  EXPECT_TRUE(detail::destination_order_pays(1024, 1));
  EXPECT_TRUE(detail::destination_order_pays(3, 1));
  EXPECT_TRUE(detail::destination_order_pays(2, 1));
  EXPECT_FALSE(detail::destination_order_pays(1, 1));
  // 1024 random pairs over 1024 blocks each side, as the bench shuffles them: few merges, not taken.
  std::vector<std::int64_t> src(1024);
  std::vector<std::int64_t> dst(1024);
  std::iota(src.begin(), src.end(), 0);
  std::iota(dst.begin(), dst.end(), 0);
  std::mt19937_64 rng(7 * 65536 + 2);
  std::shuffle(src.begin(), src.end(), rng);
  std::shuffle(dst.begin(), dst.end(), rng);
  std::vector<std::int64_t> pairs;
  for (std::size_t k = 0; k < src.size(); ++k) pairs.insert(pairs.end(), {src[k], dst[k]});
  const auto given = detail::plan_block_runs(pairs, 1024, 1024);
  const auto sorted = detail::runs_in_destination_order(given, 1024);
  EXPECT_FALSE(detail::destination_order_pays(given.size(), sorted.size()));
}

// copy_blocks plans from its thread's pool: a plan's memory goes back to the pool, and the next plan of
// the thread gets it again instead of asking the C library; another thread has a pool of its own.
TEST(BlockPlan, PlansReuseTheThreadsMemory) {
  std::vector<std::int64_t> pairs;
  for (std::int64_t k = 0; k < 1024; ++k) pairs.insert(pairs.end(), {(k * 7) % 1024, 1023 - k});
  const void* first = nullptr;
  {
    const auto runs = detail::plan_block_runs(pairs, 1024, 1024, detail::plan_memory());
    ASSERT_EQ(runs.size(), 1024u);
    first = runs.data();
  }
  for (int again = 0; again < 3; ++again) {
    const auto runs = detail::plan_block_runs(pairs, 1024, 1024, detail::plan_memory());
    EXPECT_EQ(static_cast<const void*>(runs.data()), first) << again;
    EXPECT_EQ(runs[5].src, 35u);
    EXPECT_EQ(runs[5].dst, 1018u);
  }
  std::pmr::memory_resource* other = nullptr;
  std::thread([&] { other = detail::plan_memory(); }).join();
  EXPECT_NE(other, detail::plan_memory());
}

TEST(BlockPlan, NoPairsNoRuns) { EXPECT_TRUE(detail::plan_block_runs({}, 0, 0).empty()); }

TEST(BlockPlan, PiecesOfPackedAndStridedRuns) {
  const BlockGeometry packed = detail::resolve_layout(side(100), 4096, 2, true, "destination");
  const std::vector<BlockRun> runs{{0, 10, 5}, {50, 0, 1}};
  auto pieces = detail::block_pieces(runs, packed, packed, 4096, 2);
  ASSERT_EQ(pieces.size(), 2u);  // layers back to back, blocks back to back: one copy a run
  EXPECT_EQ(pieces[0].width, 5u * 2 * 4096);
  EXPECT_EQ(pieces[0].dst_offset, 10u * 2 * 4096);
  EXPECT_EQ(detail::row_count(pieces), 2u);
  // Layers apart on one side: a 2D copy per layer of a run.
  const BlockGeometry layered =
      detail::resolve_layout(side(100, 4096, 100 * 4096), 4096, 2, true, "destination");
  pieces = detail::block_pieces(runs, packed, layered, 4096, 2);
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_EQ(pieces[0].height, 5u);
  EXPECT_EQ(pieces[0].src_pitch, 2u * 4096);
  EXPECT_EQ(pieces[0].dst_pitch, 4096u);
  EXPECT_EQ(pieces[1].src_offset, 4096u);
  EXPECT_EQ(pieces[1].dst_offset, 10u * 4096 + 100 * 4096);
  EXPECT_EQ(detail::row_count(pieces), 12u);
}

TEST(BlockPlan, PathChoice) {
  using detail::choose_block_path;
  constexpr std::size_t k4 = 4096, m1 = std::size_t{1} << 20;
  EXPECT_EQ(choose_block_path(BlockPath::batch, 1, 1, true, false, true), BlockPath::batch);
  // Stores into host memory: the kernel below 256 KiB rows, a batch from there.
  EXPECT_EQ(choose_block_path(BlockPath::automatic, 1024 * k4, 1024, true, false, true), BlockPath::kernel);
  EXPECT_EQ(choose_block_path(BlockPath::automatic, 1024 * 63 * k4, 1024, true, false, true),
            BlockPath::kernel);
  EXPECT_EQ(choose_block_path(BlockPath::automatic, 1024 * 64 * k4, 1024, true, false, true),
            BlockPath::batch);
  EXPECT_EQ(choose_block_path(BlockPath::automatic, 1024 * m1, 1024, true, false, true), BlockPath::batch);
  // Loads from host memory: the kernel below 32 KiB rows, a batch from there.
  EXPECT_EQ(choose_block_path(BlockPath::automatic, 1024 * k4, 1024, true, true, true), BlockPath::kernel);
  EXPECT_EQ(choose_block_path(BlockPath::automatic, 1024 * 4 * k4, 1024, true, true, true),
            BlockPath::kernel);
  EXPECT_EQ(choose_block_path(BlockPath::automatic, 1024 * 8 * k4, 1024, true, true, true), BlockPath::batch);
  // No kernel, no batch (legacy stream, capture): the copy engines.
  EXPECT_EQ(choose_block_path(BlockPath::automatic, 1024 * k4, 1024, false, false, true), BlockPath::batch);
  EXPECT_EQ(choose_block_path(BlockPath::automatic, 1024 * k4, 1024, false, false, false),
            BlockPath::copy_engine);
  // Merged runs of 4 MiB and more: one DMA each.
  EXPECT_EQ(choose_block_path(BlockPath::automatic, 64 * detail::copy_engine_min_row, 64, true, false, true),
            BlockPath::copy_engine);
}

// A batch is split over streams from 32 KiB rows on average, 16 rows a part at least, 8 parts at most.
TEST(BlockPlan, BatchSplit) {
  constexpr std::size_t k32 = std::size_t{32} << 10;
  constexpr std::size_t k64 = std::size_t{64} << 10;
  EXPECT_EQ(detail::batch_parts(0, 0), 1U);
  EXPECT_EQ(detail::batch_parts(1024 * (k32 - 1), 1024), 1U);  // rows just under 32 KiB: one stream
  EXPECT_EQ(detail::batch_parts(1024 * k32, 1024), 8U);
  EXPECT_EQ(detail::batch_parts(1024 * k64, 1024), 8U);
  EXPECT_EQ(detail::batch_parts(37 * k64, 37), 2U);
  EXPECT_EQ(detail::batch_parts(15 * k64, 15), 1U);
  EXPECT_EQ(detail::batch_parts(64 * detail::copy_engine_min_row, 64), 4U);
}

// Eight parts: 1/64, 1/32 and 1/16 of the rows first, then five equal; fewer parts are equal.
TEST(BlockPlan, BatchCuts) {
  const auto cuts = [](std::size_t rows, std::size_t parts) {
    std::vector<std::size_t> out;
    for (std::size_t j = 0; j <= parts; ++j) out.push_back(detail::batch_cut(rows, parts, j));
    return out;
  };
  EXPECT_EQ(cuts(1024, 8), (std::vector<std::size_t>{0, 16, 48, 112, 294, 476, 659, 841, 1024}));
  EXPECT_EQ(cuts(128, 8), (std::vector<std::size_t>{0, 2, 6, 14, 36, 59, 82, 105, 128}));
  EXPECT_EQ(cuts(100, 4), (std::vector<std::size_t>{0, 25, 50, 75, 100}));
  EXPECT_EQ(cuts(37, 2), (std::vector<std::size_t>{0, 18, 37}));
  EXPECT_EQ(cuts(5, 1), (std::vector<std::size_t>{0, 5}));
}

}  // namespace
}  // namespace gpuxfer
