// gather_into: every device's buffer concatenated into caller memory (pageable, pinned, unaligned),
// with and without a skipped device; the pieces it reports; bytes past the end left alone.
#include <algorithm>
#include <optional>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kTail = 4096;  // poisoned bytes after the payload that no gather may touch

template <class Base>
class GatherIntoBySize : public PerDeviceSizes<Base> {
 protected:
  using PerDeviceSizes<Base>::expected;
  using PerDeviceSizes<Base>::register_all;
  using PerDeviceSizes<Base>::total;

  // Gathers into @p out (poisoned here first) and checks the pieces, every byte and the untouched tail.
  void gather_and_check(std::span<std::byte> out, std::optional<std::size_t> skip, const std::string& what) {
    std::fill(out.begin(), out.end(), kPoison);
    const std::size_t payload = total(skip);
    ASSERT_GE(out.size(), payload);
    const std::vector<GatherPiece> pieces = this->xfer().gather_into(out, skip);
    ASSERT_TRUE(pieces_are_concatenation(pieces, expected(skip))) << what;
    for (const GatherPiece& p : pieces) {
      if (p.size == 0) continue;
      EXPECT_TRUE(host_matches(out.subspan(p.offset, p.size), this->seed(p.device), 0,
                               what + ", device " + std::to_string(p.device)));
    }
    EXPECT_TRUE(host_is_poison(out.subspan(payload), what + ", bytes past the payload"));
  }

  void check_pageable() {
    register_all();
    std::vector<std::byte> out(total(std::nullopt) + kTail);
    gather_and_check(out, std::nullopt, "pageable");
  }

  void check_pinned() {
    register_all();
    const PinnedMemory out(total(std::nullopt) + kTail);
    gather_and_check(out.span(), std::nullopt, "pinned");
  }

  void check_unaligned_pageable() {
    register_all();
    std::vector<std::byte> out(total(std::nullopt) + kTail + 1, kPoison);
    gather_and_check(std::span(out).subspan(1), std::nullopt, "pageable at out.data() + 1");
    EXPECT_EQ(out[0], kPoison) << "the byte before the output was written";
  }

  void check_unaligned_pinned() {
    register_all();
    const PinnedMemory out(total(std::nullopt) + kTail + 1);
    out.span()[0] = kPoison;
    gather_and_check(out.span().subspan(1), std::nullopt, "pinned at out.data() + 1");
    EXPECT_EQ(out.span()[0], kPoison) << "the byte before the output was written";
  }

  void check_skipping_each_device() {
    register_all();
    for (std::size_t skip = 0; skip < this->device_count(); ++skip) {
      std::vector<std::byte> out(total(skip) + kTail);
      gather_and_check(out, skip, "pageable, device " + std::to_string(skip) + " skipped");
    }
  }
};

GPUXFER_GPU_AND_MULTI_GPU(GatherIntoBySize);

GPUXFER_TEST_P_ON_BOTH(GatherIntoBySize, IntoPageableMemory, check_pageable)
GPUXFER_TEST_P_ON_BOTH(GatherIntoBySize, IntoPinnedMemory, check_pinned)
GPUXFER_TEST_P_ON_BOTH(GatherIntoBySize, IntoUnalignedPageableMemory, check_unaligned_pageable)
GPUXFER_TEST_P_ON_BOTH(GatherIntoBySize, IntoUnalignedPinnedMemory, check_unaligned_pinned)
GPUXFER_TEST_P_ON_BOTH(GatherIntoBySize, SkippingEachDevice, check_skipping_each_device)

GPUXFER_INSTANTIATE_ON_BOTH(GatherIntoBySize, ::testing::ValuesIn(kSizes), size_param_name);

using GpuGatherInto = GpuTest;

TEST_F(GpuGatherInto, OutputTooSmallIsRejectedAndLeftAlone) {
  std::size_t payload = 0;
  for (std::size_t i = 0; i < device_count(); ++i) payload += register_pattern(i, kMiB + 7 + i).size();
  std::vector<std::byte> pageable(payload - 1, kPoison);
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_into(pageable); }, Errc::invalid_argument));
  EXPECT_TRUE(host_is_poison(pageable, "too-small pageable output"));
  const PinnedMemory pinned(payload - 1);
  std::fill(pinned.span().begin(), pinned.span().end(), kPoison);
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_into(pinned.span()); }, Errc::invalid_argument));
  EXPECT_TRUE(host_is_poison(pinned.span(), "too-small pinned output"));
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_into({}); }, Errc::invalid_argument)) << "empty output";
}

TEST_F(GpuGatherInto, SkippingTheOnlyLargeDeviceNeedsNoRoomForIt) {
  register_pattern(0, 8 * kMiB + 1);
  for (std::size_t i = 1; i < device_count(); ++i) register_pattern(i, 4095);
  std::vector<std::byte> out(4095 * (device_count() - 1) + kTail, kPoison);
  const auto pieces = xfer().gather_into(out, 0);
  std::vector<GatherPiece> want;
  for (std::size_t i = 1; i < device_count(); ++i) want.push_back({i, 0, 4095});
  ASSERT_TRUE(pieces_are_concatenation(pieces, want));
  for (const GatherPiece& p : pieces) {
    if (p.size != 0) {
      EXPECT_TRUE(host_matches(std::span(out).subspan(p.offset, p.size), seed(p.device), 0, "piece"));
    }
  }
  EXPECT_TRUE(host_is_poison(std::span(out).subspan(4095 * (device_count() - 1)), "bytes past the payload"));
}

TEST_F(GpuGatherInto, NothingRegisteredWritesNothing) {
  std::vector<std::byte> out(kTail, kPoison);
  const auto pieces = xfer().gather_into(out);
  EXPECT_TRUE(pieces_are_concatenation(pieces, {}));
  EXPECT_TRUE(host_is_poison(out, "output of an empty gather"));
}

}  // namespace
}  // namespace gpuxfer::test
