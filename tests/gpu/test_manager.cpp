// MultiGpuManager on real devices: what it reports about them and their links, and Options::devices.
#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

using GpuManager = GpuTest;
using MultiGpuManagerTest = MultiGpuTest;

TEST_F(GpuManager, DevicesMatchCuda) {
  int cuda_count = 0;
  cuda_check(cudaGetDeviceCount(&cuda_count), "cudaGetDeviceCount");
  EXPECT_EQ(device_count(), static_cast<std::size_t>(cuda_count));
  EXPECT_TRUE(manager().device_status().empty()) << manager().device_status();
  for (std::size_t i = 0; i < device_count(); ++i) {
    const DeviceInfo& info = manager().device(i);
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, info.ordinal), "cudaGetDeviceProperties");
    EXPECT_EQ(info.name, prop.name) << i;
    EXPECT_EQ(info.total_memory, prop.totalGlobalMem) << i;
    EXPECT_EQ(info.cc_major, prop.major) << i;
    EXPECT_EQ(info.cc_minor, prop.minor) << i;
    EXPECT_EQ(info.multiprocessors, prop.multiProcessorCount) << i;
    EXPECT_GT(info.copy_engines, 0) << i;
    EXPECT_FALSE(info.pci_bus_id.empty()) << i;
    EXPECT_EQ(manager().link(i, i), LinkKind::self);
  }
}

TEST_F(GpuManager, MinDevicesOfWhatExistsIsMet) {
  Options opts;
  opts.min_devices = static_cast<int>(device_count());
  EXPECT_EQ(MultiGpuManager::create(opts)->device_count(), device_count());
  opts.min_devices = static_cast<int>(device_count()) + 1;
  EXPECT_TRUE(throws_error([&] { (void)MultiGpuManager::create(opts); }, Errc::no_device));
}

TEST_F(GpuManager, UnknownOrdinalIsRejected) {
  Options opts = options();
  const int missing = static_cast<int>(device_count()) + 5;
  opts.devices = {missing};
  EXPECT_TRUE(test::throws_error_naming([&] { (void)MultiGpuManager::create(opts); }, Errc::invalid_option,
                                        static_cast<std::size_t>(missing)));
}

// "Every pair of distinct devices has peer access" holds vacuously for one device.
TEST_F(GpuManager, OneDeviceHasAllPeersEnabled) {
  Options opts = options();
  opts.devices = {ordinal(0)};
  const auto single = MultiGpuManager::create(opts);
  ASSERT_EQ(single->device_count(), 1u);
  EXPECT_TRUE(single->all_peers_enabled());
}

TEST_F(MultiGpuManagerTest, LinksAndPeersAreSymmetric) {
  for (std::size_t a = 0; a < device_count(); ++a) {
    for (std::size_t b = 0; b < device_count(); ++b) {
      if (a == b) continue;
      EXPECT_NE(manager().link(a, b), LinkKind::self);
      EXPECT_EQ(manager().peer_enabled(a, b), manager().peer_enabled(b, a)) << a << " " << b;
      int can = 0;
      cuda_check(cudaDeviceCanAccessPeer(&can, ordinal(a), ordinal(b)), "cudaDeviceCanAccessPeer");
      EXPECT_EQ(manager().peer_enabled(a, b), can != 0) << "peer access " << a << " -> " << b;
      EXPECT_EQ(manager().link(a, b) == LinkKind::host_staged, !manager().peer_enabled(a, b)) << a << " " << b;
    }
  }
}

TEST_F(MultiGpuManagerTest, DeviceSubsetInTheGivenOrder) {
  Options opts = options();
  opts.devices = {ordinal(1), ordinal(0)};
  const auto reversed = MultiGpuManager::create(opts);
  ASSERT_EQ(reversed->device_count(), 2u);
  EXPECT_EQ(reversed->device(0).ordinal, ordinal(1));
  EXPECT_EQ(reversed->device(1).ordinal, ordinal(0));

  // Index 0 of the reversed manager is CUDA device ordinal(1): its buffer must live there.
  InterGpuTransfer engine(reversed);
  DeviceMemory& on_second = allocate(1, 4095);
  fill_device(on_second.ordinal(), on_second.get(), on_second.size(), seed(1));
  engine.set_device_buffer(0, on_second.get(), on_second.size());
  const auto out = engine.gather_all();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(host_matches(out[0].span(), seed(1), 0, "index 0 of the reversed manager"));
  EXPECT_TRUE(out[1].empty());
  EXPECT_TRUE(throws_error([&] { engine.set_device_buffer(1, on_second.get(), on_second.size()); }, Errc::invalid_buffer));
}

}  // namespace
}  // namespace gpuxfer::test
