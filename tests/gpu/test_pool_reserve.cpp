// Options::pool_reserve: the blocks are pinned when the manager is made, on each device's staging node, and
// a loop that keeps the previous gather's result while the next one runs pins nothing after that.
#include <utility>
#include <vector>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kBytes = 8 * kMiB + 3;  // odd: the pool rounds it up to a size class

class GpuPoolReserve : public GpuTest {
 protected:
  [[nodiscard]] Options options() const override {
    Options opts = GpuTest::options();
    opts.pool_reserve = parse_size_list("2x" + std::to_string(kBytes));
    return opts;
  }
};

TEST_F(GpuPoolReserve, ALoopKeepingThePreviousResultPinsNothingAfterTheManagerIsMade) {
  const PoolStats made = manager().pinned_pool().stats();
  EXPECT_EQ(made.allocations, 2 * device_count()) << "two blocks per device, pinned by create()";
  EXPECT_GE(made.cached, 2 * kBytes * device_count());
  EXPECT_EQ(made.in_use, 0u);
  for (std::size_t d = 0; d < device_count(); ++d) register_pattern(d, kBytes);
  std::vector<HostBuffer> previous;
  for (int round = 0; round < 4; ++round) {
    std::vector<HostBuffer> out = xfer().gather_all();  // while the previous round's result is kept
    ASSERT_EQ(out.size(), device_count());
    for (std::size_t d = 0; d < device_count(); ++d) {
      ASSERT_TRUE(host_matches(out[d].span(), seed(d), 0, "round " + std::to_string(round)));
    }
    previous = std::move(out);
  }
  EXPECT_EQ(manager().pinned_pool().stats().allocations, made.allocations) << "a block was pinned in the loop";
}

// Without a reserve the same loop pins its two blocks inside it: the test above can fail.
class GpuPoolNoReserve : public GpuTest {};

TEST_F(GpuPoolNoReserve, TheSameLoopPinsItsBlocksInsideIt) {
  const std::size_t before = manager().pinned_pool().stats().allocations;
  EXPECT_EQ(before, 0u);
  register_pattern(0, kBytes);
  std::vector<HostBuffer> previous;
  for (int round = 0; round < 4; ++round) previous = xfer().gather_all();
  EXPECT_GE(manager().pinned_pool().stats().allocations, before + 2);
}

}  // namespace
}  // namespace gpuxfer::test
