// MultiGpuManager::create on any machine: min_devices 0 always works and says why there are no devices;
// min_devices 1 without a device throws no_device with the CUDA reason; bad options are refused.
#include <string>

#include <gtest/gtest.h>

#include <gpuxfer/multi_gpu_manager.hpp>

#include "common/expect_error.hpp"

namespace gpuxfer {
namespace {

using test::throws_error;

Options zero_devices() {
  Options opts;
  opts.min_devices = 0;
  return opts;
}

TEST(Manager, MinDevicesZeroAlwaysGivesAManager) {
  const auto manager = MultiGpuManager::create(zero_devices());
  ASSERT_NE(manager, nullptr);
  EXPECT_EQ(manager->devices().size(), manager->device_count());
  if (manager->device_count() == 0) {
    EXPECT_FALSE(manager->device_status().empty()) << "no device and no reason";
  } else {
    for (std::size_t i = 0; i < manager->device_count(); ++i) {
      EXPECT_GE(manager->device(i).ordinal, 0);
      EXPECT_FALSE(manager->device(i).name.empty());
      EXPECT_EQ(manager->link(i, i), LinkKind::self);
    }
  }
}

// Simulated devices spread over the GPUs there are: none without a GPU, with the same reason, and the
// minimum still counts the devices made.
TEST(Manager, SimulatedDevicesWithoutAGpuAreNone) {
  const auto probe = MultiGpuManager::create(zero_devices());
  if (probe->device_count() > 0) GTEST_SKIP() << "a CUDA device is present: this is the no-GPU path";
  Options opts = zero_devices();
  opts.simulated_devices = 4;
  const auto manager = MultiGpuManager::create(opts);
  EXPECT_EQ(manager->device_count(), 0u);
  EXPECT_EQ(manager->device_status(), probe->device_status());
  EXPECT_EQ(manager->options().simulated_devices, 4u);
  opts.min_devices = 1;
  EXPECT_TRUE(throws_error([&] { (void)MultiGpuManager::create(opts); }, Errc::no_device));
}

TEST(Manager, NcclStatusSaysWhyItIsOff) {
  Options opts = zero_devices();
  opts.enable_nccl = false;
  const auto manager = MultiGpuManager::create(opts);
  EXPECT_FALSE(manager->nccl_available());
  EXPECT_NE(manager->nccl_status().find("GPUXFER_NCCL"), std::string::npos) << manager->nccl_status();
  EXPECT_EQ(MultiGpuManager::create(zero_devices())->nccl_status().empty(),
            MultiGpuManager::create(zero_devices())->nccl_available());
}

TEST(Manager, KeepsItsOptions) {
  Options opts = zero_devices();
  opts.chunk_bytes = std::size_t{1} << 20;
  opts.pool_limit_bytes = std::size_t{64} << 20;
  opts.host_threads = 3;
  const auto manager = MultiGpuManager::create(opts);
  EXPECT_EQ(manager->options().min_devices, 0);
  EXPECT_EQ(manager->options().chunk_bytes, std::size_t{1} << 20);
  EXPECT_EQ(manager->options().pool_limit_bytes, std::size_t{64} << 20);
  EXPECT_EQ(manager->options().host_threads, 3u);
  EXPECT_EQ(manager->pinned_pool().stats().limit, std::size_t{64} << 20);
  EXPECT_EQ(manager->pinned_pool().stats().allocations, 0u) << "nothing pinned before the first transfer";
}

TEST(Manager, IndicesPastTheEndAreInvalidBuffer) {
  const auto manager = MultiGpuManager::create(zero_devices());
  const std::size_t bad = manager->device_count() + 7;
  EXPECT_TRUE(test::throws_error_naming([&] { (void)manager->device(bad); }, Errc::invalid_buffer, bad));
  EXPECT_TRUE(test::throws_error_naming([&] { (void)manager->link(bad, bad + 1); }, Errc::invalid_buffer, bad));
  EXPECT_TRUE(test::throws_error_naming([&] { (void)manager->peer_enabled(bad, bad + 1); }, Errc::invalid_buffer, bad));
  if (manager->device_count() > 0) {
    EXPECT_TRUE(test::throws_error_naming([&] { (void)manager->link(0, bad); }, Errc::invalid_buffer, bad));
    EXPECT_TRUE(test::throws_error_naming([&] { (void)manager->peer_enabled(0, bad); }, Errc::invalid_buffer, bad));
  }
}

TEST(Manager, NcclVersionIsZeroWithoutNccl) {
  Options opts = zero_devices();
  opts.enable_nccl = false;
  const auto manager = MultiGpuManager::create(opts);
  EXPECT_FALSE(manager->nccl_available());
  EXPECT_EQ(manager->nccl_version(), 0);
  const auto with_nccl = MultiGpuManager::create(zero_devices());
  EXPECT_EQ(with_nccl->nccl_available(), with_nccl->nccl_version() > 0);
}

TEST(Manager, NoDeviceWhenOneIsRequiredGivesTheCudaReason) {
  const auto probe = MultiGpuManager::create(zero_devices());
  if (probe->device_count() != 0) GTEST_SKIP() << "this machine has a GPU";
  Options opts;
  opts.min_devices = 1;
  EXPECT_TRUE(throws_error([&] { (void)MultiGpuManager::create(opts); }, Errc::no_device, probe->device_status()));
}

TEST(Manager, MoreDevicesThanExistGivesNoDevice) {
  const auto probe = MultiGpuManager::create(zero_devices());
  Options opts;
  opts.min_devices = static_cast<int>(probe->device_count()) + 1;
  EXPECT_TRUE(throws_error([&] { (void)MultiGpuManager::create(opts); }, Errc::no_device));
}

TEST(Manager, InvalidOptionsAreRefused) {
  Options opts = zero_devices();
  opts.host_threads = 0;
  EXPECT_TRUE(throws_error([&] { (void)MultiGpuManager::create(opts); }, Errc::invalid_option, "host_threads"));
  opts = zero_devices();
  opts.min_devices = -1;
  EXPECT_TRUE(throws_error([&] { (void)MultiGpuManager::create(opts); }, Errc::invalid_option, "min_devices"));
}

}  // namespace
}  // namespace gpuxfer
