// gather / gather_blocking / gather_all: every byte of every registered buffer reaches the host, in
// ascending device order with the destination skipped; handles; pool reuse after warm-up.
#include <chrono>
#include <thread>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

// Every device registers its own size (PerDeviceSizes) so that a swapped or truncated entry shows.
template <class Base>
class GatherBySize : public PerDeviceSizes<Base> {
 protected:
  using PerDeviceSizes<Base>::size_of;
  using PerDeviceSizes<Base>::register_all;

  void poison_pool() {
    std::vector<std::size_t> sizes;
    for (std::size_t i = 0; i < this->device_count(); ++i) sizes.push_back(size_of(i));
    test::poison_pool(this->manager().pinned_pool(), sizes);
  }

  // Entry j of a gather to @p dst (sources ascending, dst skipped).
  void expect_gathered(const std::vector<HostBuffer>& out, std::size_t dst) {
    ASSERT_EQ(out.size(), this->device_count() - 1) << "entries of a gather to " << dst;
    for (std::size_t j = 0; j < out.size(); ++j) {
      const std::size_t src = j < dst ? j : j + 1;
      const std::string what = "entry " + std::to_string(j) + " (device " + std::to_string(src) +
                               ") of a gather to " + std::to_string(dst);
      ASSERT_EQ(out[j].size(), size_of(src)) << what;
      EXPECT_TRUE(host_matches(out[j].span(), this->seed(src), 0, what));
    }
  }

  void check_gather_all() {
    register_all();
    poison_pool();
    const auto out = this->xfer().gather_all();
    ASSERT_EQ(out.size(), this->device_count());
    for (std::size_t i = 0; i < out.size(); ++i) {
      ASSERT_EQ(out[i].size(), size_of(i)) << "device " << i;
      EXPECT_TRUE(host_matches(out[i].span(), this->seed(i), 0, "gather_all entry " + std::to_string(i)));
    }
  }

  void check_gather_blocking() {
    register_all();
    for (std::size_t dst = 0; dst < this->device_count(); ++dst) {
      poison_pool();
      expect_gathered(this->xfer().gather_blocking(dst), dst);
    }
  }

  void check_gather_handle() {
    register_all();
    for (std::size_t dst = 0; dst < this->device_count(); ++dst) {
      poison_pool();
      GatherHandle handle = this->xfer().gather(dst);
      handle.wait();
      EXPECT_TRUE(handle.ready());
      expect_gathered(handle.get(), dst);
      EXPECT_TRUE(handle.get().empty()) << "a second get() hands nothing over";
    }
  }
};

GPUXFER_GPU_AND_MULTI_GPU(GatherBySize);

GPUXFER_TEST_P_ON_BOTH(GatherBySize, GatherAllDeliversEveryByte, check_gather_all)
GPUXFER_TEST_P_ON_BOTH(GatherBySize, GatherBlockingToEveryDestination, check_gather_blocking)
GPUXFER_TEST_P_ON_BOTH(GatherBySize, GatherHandleToEveryDestination, check_gather_handle)

GPUXFER_INSTANTIATE_ON_BOTH(GatherBySize, ::testing::ValuesIn(kSizes), size_param_name);

using GpuGather = GpuTest;
using MultiGpuGather = MultiGpuTest;

TEST_F(GpuGather, NothingRegisteredGivesEmptyEntries) {
  const auto all = xfer().gather_all();
  ASSERT_EQ(all.size(), device_count());
  for (const HostBuffer& b : all) EXPECT_TRUE(b.empty());
  const auto skipped = xfer().gather_blocking(0);
  ASSERT_EQ(skipped.size(), device_count() - 1);
  for (const HostBuffer& b : skipped) EXPECT_TRUE(b.empty());
}

TEST_F(GpuGather, DestinationOutOfRangeIsRejected) {
  const std::size_t bad = device_count();
  EXPECT_TRUE(throws_error_naming([&] { (void)xfer().gather(bad); }, Errc::invalid_buffer, bad));
  EXPECT_TRUE(throws_error_naming([&] { (void)xfer().gather_blocking(bad); }, Errc::invalid_buffer, bad));
}

TEST_F(GpuGather, NoPinnedAllocationAfterWarmUp) {
  std::vector<DeviceMemory*> mem;
  for (std::size_t i = 0; i < device_count(); ++i) mem.push_back(&register_pattern(i, 8 * kMiB + 5 + i));
  { const auto warm_up = xfer().gather_all(); }
  for (std::size_t i = 0; i < device_count(); ++i) {
    fill_device(mem[i]->ordinal(), mem[i]->get(), mem[i]->size(), other_seed(i));
  }
  const std::size_t allocations = manager().pinned_pool().stats().allocations;
  const auto out = xfer().gather_all();
  EXPECT_EQ(manager().pinned_pool().stats().allocations, allocations) << "cudaHostAlloc on the hot path";
  ASSERT_EQ(out.size(), device_count());
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_TRUE(host_matches(out[i].span(), other_seed(i), 0, "second gather, device " + std::to_string(i)));
  }
}

TEST_F(MultiGpuGather, ReadyBecomesTrueWithoutWait) {
  register_pattern(0, 3 * kMiB + 1);
  register_pattern(1, 5 * kMiB + 3);
  GatherHandle handle = xfer().gather(1);
  // A deadline, not a timing assertion: a handle that never becomes ready would hang the test.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!handle.ready() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ASSERT_TRUE(handle.ready()) << "gather not complete after 60 s";
  const auto out = handle.get();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(), 3 * kMiB + 1);
  EXPECT_TRUE(host_matches(out[0].span(), seed(0), 0, "device 0 gathered to 1"));
}

TEST_F(MultiGpuGather, GetWithoutWaitWaits) {
  register_pattern(0, 64 * kMiB);
  register_pattern(1, 64 * kMiB + 1);
  const auto out = xfer().gather(0).get();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(), 64 * kMiB + 1);
  EXPECT_TRUE(host_matches(out[0].span(), seed(1), 0, "device 1 gathered to 0"));
}

TEST_F(MultiGpuGather, DroppedHandleIsSafeAndGivesItsMemoryBack) {
  for (std::size_t i = 0; i < device_count(); ++i) register_pattern(i, 64 * kMiB + i);
  for (int round = 0; round < 3; ++round) {
    static_cast<void>(xfer().gather(0));  // dropped at once, never waited on
  }
  {
    const auto out = xfer().gather_blocking(0);
    ASSERT_EQ(out.size(), device_count() - 1);
    for (std::size_t j = 0; j < out.size(); ++j) {
      EXPECT_TRUE(host_matches(out[j].span(), seed(j + 1), 0, "device " + std::to_string(j + 1)));
    }
  }
  for (std::size_t i = 0; i < device_count(); ++i) {
    const DeviceGuard guard(ordinal(i));
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  // A deadline, not a timing assertion: the pool may take back finished blocks lazily.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (manager().pinned_pool().stats().in_use != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const PoolStats stats = manager().pinned_pool().stats();
  EXPECT_EQ(stats.in_use, 0u) << "pending " << stats.pending << ", cached " << stats.cached;
}

TEST_F(MultiGpuGather, UnregisteredSourceGivesAnEmptyEntry) {
  register_pattern(1, 4095);
  const auto to0 = xfer().gather_blocking(0);
  ASSERT_EQ(to0.size(), device_count() - 1);
  ASSERT_EQ(to0[0].size(), 4095u);
  EXPECT_TRUE(host_matches(to0[0].span(), seed(1), 0, "device 1 gathered to 0"));
  const auto to1 = xfer().gather_blocking(1);
  ASSERT_EQ(to1.size(), device_count() - 1);
  EXPECT_TRUE(to1[0].empty()) << "device 0 has nothing registered";
}

}  // namespace
}  // namespace gpuxfer::test
