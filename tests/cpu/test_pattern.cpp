// The host side of gpuxfer::pattern: deterministic, different for every seed, device and offset, and
// fill_host / count_mismatches_host agree with byte_at at any offset.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include <gpuxfer/testing/pattern.hpp>

namespace gpuxfer {
namespace {

constexpr std::size_t kN = 1 << 16;

std::vector<std::byte> filled(std::size_t n, std::uint64_t seed, std::uint64_t offset = 0) {
  std::vector<std::byte> data(n);
  pattern::fill_host(data, seed, offset);
  return data;
}

std::size_t differing(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] != b[i] ? 1 : 0;
  return n;
}

TEST(Pattern, ByteAtIsDeterministic) {
  for (std::uint64_t i = 0; i < 4096; ++i) {
    ASSERT_EQ(pattern::byte_at(42, i), pattern::byte_at(42, i)) << i;
  }
  EXPECT_EQ(filled(kN, 7), filled(kN, 7));
}

TEST(Pattern, SeedsForDevicesAndRunsDiffer) {
  EXPECT_EQ(pattern::seed_for(1, 0), pattern::seed_for(1, 0));
  EXPECT_NE(pattern::seed_for(1, 0), pattern::seed_for(1, 1));
  EXPECT_NE(pattern::seed_for(1, 0), pattern::seed_for(2, 0));
  EXPECT_NE(pattern::seed_for(0, 1), pattern::seed_for(1, 0)) << "run and device must not commute";
  // The streams differ in (nearly) every byte, not just the seeds: 1/256 of bytes agree by chance.
  const auto a = filled(kN, pattern::seed_for(1, 0));
  const auto b = filled(kN, pattern::seed_for(1, 1));
  const auto c = filled(kN, pattern::seed_for(2, 0));
  EXPECT_GT(differing(a, b), kN * 95 / 100);
  EXPECT_GT(differing(a, c), kN * 95 / 100);
  EXPECT_GT(differing(filled(kN, 0), filled(kN, 1)), kN * 95 / 100) << "adjacent raw seeds";
}

TEST(Pattern, ShiftedOffsetsDiffer) {
  // A byte that lands one place off must be caught: the stream is not periodic at small shifts.
  const auto base = filled(kN + 64, 99);
  for (std::size_t shift : {1, 2, 4, 8, 16, 64}) {
    const std::vector<std::byte> shifted(base.begin() + static_cast<std::ptrdiff_t>(shift),
                                         base.begin() + static_cast<std::ptrdiff_t>(shift + kN));
    EXPECT_GT(differing(std::vector<std::byte>(base.begin(), base.begin() + kN), shifted), kN * 95 / 100) << shift;
  }
}

TEST(Pattern, LooksRandomNotZero) {
  std::array<std::size_t, 256> histogram{};
  for (const std::byte b : filled(kN, 1234)) ++histogram[static_cast<std::uint8_t>(b)];
  // Expected 256 of each value; allow wide slack, but no value may be missing or dominate.
  for (std::size_t v = 0; v < histogram.size(); ++v) {
    EXPECT_GT(histogram[v], 128u) << "value " << v;
    EXPECT_LT(histogram[v], 512u) << "value " << v;
  }
}

TEST(Pattern, FillAndCountRoundTrip) {
  auto data = filled(kN + 3, 5);
  for (std::size_t i = 0; i < data.size(); ++i) {
    ASSERT_EQ(static_cast<std::uint8_t>(data[i]), pattern::byte_at(5, i)) << i;
  }
  EXPECT_EQ(pattern::count_mismatches_host(data, 5), 0u);
  EXPECT_EQ(pattern::count_mismatches_host(data, 6), differing(data, filled(kN + 3, 6)));
  data[17] = ~data[17];
  data[kN + 2] = ~data[kN + 2];
  EXPECT_EQ(pattern::count_mismatches_host(data, 5), 2u);
}

TEST(Pattern, WrongSeedOrOffsetIsCaught) {
  const auto data = filled(kN, 8);
  EXPECT_GT(pattern::count_mismatches_host(data, 9), kN * 95 / 100);
  EXPECT_GT(pattern::count_mismatches_host(data, 8, 1), kN * 95 / 100);
  const std::vector<std::byte> zeros(kN);
  EXPECT_GT(pattern::count_mismatches_host(zeros, 8), kN * 95 / 100);
}

TEST(Pattern, OffsetFillEqualsTheSliceOfAFullFill) {
  const auto full = filled(kN, 31);
  for (const std::size_t offset : {std::size_t{1}, std::size_t{3}, std::size_t{4095}, std::size_t{4096}, kN / 2 + 7}) {
    const std::size_t n = kN - offset;
    const auto part = filled(n, 31, offset);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), full.begin() + static_cast<std::ptrdiff_t>(offset))) << offset;
    EXPECT_EQ(pattern::count_mismatches_host(std::span(full).subspan(offset), 31, offset), 0u) << offset;
  }
}

TEST(Pattern, LargeOffsetsWork) {
  const std::uint64_t offset = (std::uint64_t{1} << 40) + 5;  // past any 32-bit index
  const auto part = filled(4096, 3, offset);
  for (std::size_t i = 0; i < part.size(); ++i) {
    ASSERT_EQ(static_cast<std::uint8_t>(part[i]), pattern::byte_at(3, offset + i)) << i;
  }
  EXPECT_EQ(pattern::count_mismatches_host(part, 3, offset), 0u);
  EXPECT_GT(differing(part, filled(4096, 3, offset & 0xFFFFFFFFu)), 4096u * 95 / 100) << "offset truncated to 32 bits";
}

TEST(Pattern, EmptySpansAreFine) {
  pattern::fill_host({}, 1);
  EXPECT_EQ(pattern::count_mismatches_host({}, 1), 0u);
}

}  // namespace
}  // namespace gpuxfer
