// The bench's interleaved measurement without a GPU: which round it reports, what it counts, when it
// gives up. Samples are scripted: each call returns the next time of its side's list.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "timing.hpp"

namespace gpuxfer::bench {
namespace {

// A SampleFn that returns @p times in order (then repeats the last), @p wrong bytes each time.
SampleFn scripted(std::vector<double> times, std::size_t wrong = 0) {
  auto next = std::make_shared<std::size_t>(0);
  return [times = std::move(times), wrong, next](std::uint64_t) -> std::optional<Sample> {
    const double t = times[std::min(*next, times.size() - 1)];
    ++*next;
    return Sample{t, wrong};
  };
}

TEST(BenchInterleaved, ReportsTheLeastDisturbedRoundNotTheOneWhoseBaselineAloneWasSlow) {
  // One warm-up pair, then three rounds of two pairs. Round 1: the baseline slowed 2 x (the lowest
  // ratio, 0.5); round 2: the operation slowed 1.5 x; round 3: both 5 % slow, the least disturbed.
  const SampleFn baseline = scripted({9.0, 2.0, 2.0, 1.0, 1.0, 1.05, 1.05});
  const SampleFn op = scripted({9.0, 1.0, 1.0, 1.5, 1.5, 1.05, 1.05});
  std::uint64_t run = 0;
  const std::optional<Stats> stats = measure_interleaved(baseline, op, 1, 3, 2, run);
  ASSERT_TRUE(stats.has_value());
  ASSERT_EQ(stats->rounds.size(), 3U);
  EXPECT_DOUBLE_EQ(stats->median_s, 1.05);
  ASSERT_TRUE(stats->baseline_s.has_value());
  EXPECT_DOUBLE_EQ(*stats->baseline_s, 1.05);
  EXPECT_DOUBLE_EQ(stats->rounds[0].baseline_s, 2.0);
  EXPECT_DOUBLE_EQ(stats->rounds[1].median_s, 1.5);
  EXPECT_DOUBLE_EQ(stats->min_s, 1.0);  // every round's samples, not the warm-up's
  EXPECT_DOUBLE_EQ(stats->max_s, 1.5);
  EXPECT_EQ(stats->samples, 6);
  EXPECT_EQ(run, 14U);  // a run number per sample of either side, warm-up included
}

TEST(BenchInterleaved, CountsTheWrongBytesOfBothSidesWarmUpIncluded) {
  std::uint64_t run = 0;
  const std::optional<Stats> stats =
      measure_interleaved(scripted({1.0}, 2), scripted({1.0}, 3), 2, 2, 3, run);
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->wrong, (2U + 3U) * (2 + 2 * 3));
}

TEST(BenchInterleaved, GivesUpWhenEitherSideCannotRun) {
  const SampleFn never = [](std::uint64_t) -> std::optional<Sample> { return std::nullopt; };
  std::uint64_t run = 0;
  EXPECT_FALSE(measure_interleaved(never, scripted({1.0}), 1, 2, 2, run).has_value());
  EXPECT_FALSE(measure_interleaved(scripted({1.0}), never, 1, 2, 2, run).has_value());
}

}  // namespace
}  // namespace gpuxfer::bench
