// MultiGpuManager on real devices: what it reports about them and their links, Options::devices and
// Options::simulated_devices.
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

// Five simulated devices go round-robin over the GPUs; those of one GPU are linked same_gpu, with peer
// access and without NCCL, and each has streams of its own.
TEST_F(GpuManager, SimulatedDevicesGoRoundRobinOverTheGpus) {
  Options opts = options();
  opts.simulated_devices = 5;
  const auto simulated = MultiGpuManager::create(opts);
  ASSERT_EQ(simulated->device_count(), 5u);
  bool shares = false;
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(simulated->device(i).ordinal, ordinal(i % device_count())) << i;
    EXPECT_TRUE(simulated->device(i).simulated) << i;
    EXPECT_EQ(simulated->device(i).pci_bus_id, manager().device(i % device_count()).pci_bus_id) << i;
    for (std::size_t j = 0; j < 5; ++j) {
      if (i == j) continue;
      const bool one_gpu = simulated->device(i).ordinal == simulated->device(j).ordinal;
      shares = shares || one_gpu;
      if (one_gpu) {
        EXPECT_EQ(simulated->link(i, j), LinkKind::same_gpu) << i << " -> " << j;
        EXPECT_TRUE(simulated->peer_enabled(i, j)) << i << " -> " << j;
      }
    }
  }
  EXPECT_FALSE(manager().device(0).simulated);
  ASSERT_TRUE(shares);  // five devices over at most four GPUs of a runner
  EXPECT_FALSE(simulated->nccl_available());
  EXPECT_NE(simulated->nccl_status().find("simulated devices of one GPU"), std::string::npos)
      << simulated->nccl_status();
  EXPECT_TRUE(throws_error_containing(
      [&] {
        InterGpuTransfer engine(simulated);
        for (std::size_t i = 0; i < 5; ++i) engine.set_device_buffer(i, allocate(i % device_count(), 64).get(), 64);
        engine.broadcast_from_device(0, DeviceBroadcastPath::nccl);
      },
      Errc::unsupported, {"NCCL is off between simulated devices of one GPU"}));
}

// Without peer access, simulated devices of one GPU copy through pinned host memory as separate GPUs
// without peer access would.
TEST_F(GpuManager, SimulatedDevicesWithoutPeerAccessAreStaged) {
  Options opts = options();
  opts.simulated_devices = 2;
  opts.enable_peer_access = false;
  const auto simulated = MultiGpuManager::create(opts);
  if (!(simulated->link(0, 1) == LinkKind::same_gpu)) GTEST_SKIP() << "devices 0 and 1 are separate GPUs";
  EXPECT_FALSE(simulated->peer_enabled(0, 1));
  EXPECT_FALSE(simulated->all_peers_enabled());
}

TEST_F(MultiGpuManagerTest, LinksAndPeersAreSymmetric) {
  for (std::size_t a = 0; a < device_count(); ++a) {
    for (std::size_t b = 0; b < device_count(); ++b) {
      if (a == b) continue;
      EXPECT_NE(manager().link(a, b), LinkKind::self);
      EXPECT_EQ(manager().peer_enabled(a, b), manager().peer_enabled(b, a)) << a << " " << b;
      if (same_gpu(a, b)) {  // one GPU's memory: a device-to-device copy, always possible
        EXPECT_TRUE(manager().peer_enabled(a, b)) << a << " " << b;
        continue;
      }
      int can = 0;
      cuda_check(cudaDeviceCanAccessPeer(&can, ordinal(a), ordinal(b)), "cudaDeviceCanAccessPeer");
      EXPECT_EQ(manager().peer_enabled(a, b), can != 0) << "peer access " << a << " -> " << b;
      EXPECT_EQ(manager().link(a, b) == LinkKind::host_staged, !manager().peer_enabled(a, b)) << a << " " << b;
    }
  }
}

TEST_F(MultiGpuManagerTest, DeviceSubsetInTheGivenOrder) {
  GPUXFER_SKIP_ON_ONE_GPU(0, 1, "two ordinals to list");
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
