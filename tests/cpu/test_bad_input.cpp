// Bad input, table-driven, for everything reachable without a GPU: every public function that takes a
// device index, given one past the end; a null manager; every Options field out of range, through
// validate() and through MultiGpuManager::create; every GPUXFER_* variable with values that do not parse
// or are out of range; the parsers; the pinned pool's limit. One row per (function, bad input): the Errc
// it must throw and the words its message must contain (the index, the size, the variable and its value).
// After every row the registry and the pool's statistics are as before. Inputs that need device memory
// (host pointers, freed buffers, sizes past an allocation...) are in tests/gpu/test_bad_input.cpp. The
// rows are in bad_input_*_rows.cpp, one file a concept; the pinned pool's are here.
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/bad_input.hpp"

namespace gpuxfer::test {
namespace {

std::vector<CpuRow> pool_rows() {
  std::vector<CpuRow> rows;
  rows.push_back({"pool_acquire_above_the_limit", [](CpuWorld& w) { (void)w.pool->acquire(kPoolLimit + 1); },
                  Errc::out_of_memory,
                  [](const CpuWorld&) {
                    return Texts{"pinned pool limit of " + n(kPoolLimit) + " bytes",
                                 "asked for " + n(kPoolLimit + 1), "GPUXFER_POOL_LIMIT"};
                  }});
  rows.push_back({"pool_acquire_far_above_the_limit",
                  [](CpuWorld& w) { (void)w.pool->acquire(std::size_t{1} << 62); }, Errc::out_of_memory,
                  [](const CpuWorld&) { return Texts{"pinned pool limit of " + n(kPoolLimit) + " bytes"}; }});
  rows.push_back({"pool_of_zero_bytes_acquire_one",
                  [](CpuWorld&) {
                    PinnedPool empty(0);
                    (void)empty.acquire(1);
                  },
                  Errc::out_of_memory,
                  [](const CpuWorld&) {
                    return Texts{"pinned pool limit of 0 bytes", "asked for 1"};
                  }});
  rows.push_back(manager_pool_above_limit_row<CpuWorld>("manager_pool_acquire_above_its_limit"));
  return rows;
}

std::vector<CpuRow> all_rows() {
  std::vector<CpuRow> rows;
  for (auto part : {index_rows(), config_rows(), pool_rows()}) {
    for (CpuRow& row : part) rows.push_back(std::move(row));
  }
  return rows;
}

class CpuBadInput : public ::testing::TestWithParam<CpuRow> {
 protected:
  void SetUp() override {
    Options opts;
    opts.min_devices = 0;
    world_.manager = MultiGpuManager::create(opts);
    world_.xfer = std::make_unique<InterGpuTransfer>(world_.manager);
    world_.pool = std::make_unique<PinnedPool>(kPoolLimit);
    world_.count = world_.manager->device_count();
    world_.bad = world_.count + 7;
    world_.other = world_.count + 12;
  }

  CpuWorld world_;
};

TEST_P(CpuBadInput, IsRejectedAndChangesNothing) {
  const CpuRow& row = GetParam();
  ASSERT_TRUE(row.code) << row.name << ": every row of this table is a rejection";
  const Registry registry = registry_of(*world_.xfer, world_.count);
  const PoolSnapshot manager_pool(world_.manager->pinned_pool().stats());
  const PoolSnapshot own_pool(world_.pool->stats());

  EXPECT_TRUE(row_holds(row, world_)) << row.name;

  EXPECT_TRUE(registry_unchanged(*world_.xfer, registry));
  EXPECT_EQ(PoolSnapshot(world_.manager->pinned_pool().stats()), manager_pool) << "the manager's pinned pool";
  EXPECT_EQ(PoolSnapshot(world_.pool->stats()), own_pool) << "the pinned pool";
}

INSTANTIATE_TEST_SUITE_P(Rows, CpuBadInput, ::testing::ValuesIn(all_rows()), row_name<CpuWorld>);

// Zero sizes that are allowed: nothing to do, nothing thrown, nothing allocated.
TEST(CpuZeroSizes, AreAcceptedWhereAllowed) {
  Options opts;
  opts.min_devices = 0;
  const auto manager = MultiGpuManager::create(opts);
  InterGpuTransfer xfer(manager);
  PinnedPool pool(kPoolLimit);
  HostBuffer empty;
  ASSERT_NO_THROW(empty = pool.acquire(0)) << "acquire(0)";
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(pool.stats().allocations, 0u);
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_TRUE(parse_device_list("").empty()) << "an empty list means every device";
  EXPECT_TRUE(parse_device_list("  ").empty());
  if (manager->device_count() == 0) {
    // With no device nothing is registered anywhere: the operations without an index have nothing to do.
    EXPECT_EQ(xfer.gather_slices({}, {}), 0u) << "gather_slices of no slices";
    EXPECT_TRUE(xfer.gather_into({}).empty()) << "gather_into of nothing";
    EXPECT_TRUE(xfer.gather_all().empty());
    EXPECT_NO_THROW(xfer.broadcast({})) << "broadcast of nothing to no device";
  }
  EXPECT_EQ(manager->pinned_pool().stats().allocations, 0u);
}

// A request so large that rounding it up to a size class would overflow std::size_t is refused as
// out_of_memory like any request above the limit, before any rounding.
TEST(CpuBadInput, PoolAcquireOfSizeMaxIsOutOfMemory) {
  PinnedPool pool(kPoolLimit);
  EXPECT_TRUE(throws_error([&] { (void)pool.acquire(std::numeric_limits<std::size_t>::max()); },
                                 Errc::out_of_memory, "pinned pool limit"));
  EXPECT_EQ(pool.stats().in_use, 0u);
  EXPECT_EQ(pool.stats().allocations, 0u);
}

// Without a meaningful limit the same requests are refused by size alone (the size class of anything above
// SIZE_MAX / 2 does not fit in std::size_t).
TEST(CpuBadInput, PoolWithoutALimitRefusesSizesBeyondAnySizeClass) {
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  PinnedPool pool(max);
  for (std::size_t bytes : {max, max - 1, max - 4096, max / 2 + 1}) {
    EXPECT_TRUE(throws_error([&] { (void)pool.acquire(bytes); }, Errc::out_of_memory,
                                   "beyond any size class"))
        << bytes;
  }
  EXPECT_EQ(pool.stats().in_use, 0u);
  EXPECT_EQ(pool.stats().allocations, 0u);
}

}  // namespace
}  // namespace gpuxfer::test
