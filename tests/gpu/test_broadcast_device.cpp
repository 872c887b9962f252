// broadcast_from_device(root): the root's buffer into every other device's, for every root and path;
// NCCL switched off; bad input.
#include "common/paths.hpp"
#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kTail = 4096 + 5;  // bytes of each receiver past the data, which must not change

using Param = std::tuple<DeviceBroadcastPath, std::size_t>;

template <class Base>
class BroadcastFromDeviceBySize : public Base, public ::testing::WithParamInterface<Param> {
 protected:
  [[nodiscard]] DeviceBroadcastPath path() const { return std::get<0>(this->GetParam()); }
  [[nodiscard]] std::size_t bytes() const { return std::get<1>(this->GetParam()); }

  void check_every_root() {
    if (path() == DeviceBroadcastPath::nccl && !this->manager().nccl_available()) {
      GTEST_SKIP() << "NCCL is " << this->manager().nccl_status();
    }
    for (std::size_t root = 0; root < this->device_count(); ++root) {
      // Fresh buffers for every root: the root's holds its pattern, the others theirs, and longer.
      std::vector<DeviceMemory*> memory;
      for (std::size_t i = 0; i < this->device_count(); ++i) {
        memory.push_back(&this->register_pattern(i, i == root ? bytes() : bytes() + kTail + 13 * i));
      }
      this->xfer().broadcast_from_device(root, path());
      for (std::size_t i = 0; i < memory.size(); ++i) {
        const DeviceMemory& mem = *memory[i];
        const std::string what = path_name(path()) + " broadcast from " + std::to_string(root) + ", device " +
                                 std::to_string(i);
        // The root's buffer is bytes() long: past the data there is nothing to check.
        EXPECT_TRUE(device_holds_prefix(mem, bytes(), this->seed(root), this->seed(i), what));
      }
    }
  }
};

GPUXFER_GPU_AND_MULTI_GPU(BroadcastFromDeviceBySize);

GPUXFER_TEST_P_ON_BOTH(BroadcastFromDeviceBySize, EveryRoot, check_every_root)

const auto kParams = ::testing::Combine(::testing::ValuesIn(kDeviceBroadcastPaths), ::testing::ValuesIn(kSizes));
GPUXFER_INSTANTIATE_ON_BOTH(BroadcastFromDeviceBySize, kParams, path_size_name<DeviceBroadcastPath>);

using GpuBroadcastFromDevice = GpuTest;
using MultiGpuBroadcastFromDevice = MultiGpuTest;

TEST_F(GpuBroadcastFromDevice, RootOutOfRangeIsRejectedAndNamed) {
  for (std::size_t i = 0; i < device_count(); ++i) register_pattern(i, 4096);
  const std::size_t bad = device_count() + 4;
  for (const DeviceBroadcastPath path : kDeviceBroadcastPaths) {
    EXPECT_TRUE(throws_error_naming([&] { xfer().broadcast_from_device(bad, path); }, Errc::invalid_buffer, bad))
        << path_name(path);
  }
}

TEST_F(GpuBroadcastFromDevice, RootWithoutBufferIsRejected) {
  for (std::size_t i = 1; i < device_count(); ++i) register_pattern(i, 4096);
  for (const DeviceBroadcastPath path : kDeviceBroadcastPaths) {
    EXPECT_TRUE(throws_error_naming([&] { xfer().broadcast_from_device(0, path); }, Errc::invalid_buffer, 0))
        << path_name(path);
  }
}

TEST_F(MultiGpuBroadcastFromDevice, ReceiverWithoutBufferIsRejectedAndNamed) {
  register_pattern(0, 4096);
  for (const DeviceBroadcastPath path : kDeviceBroadcastPaths) {
    EXPECT_TRUE(throws_error_naming([&] { xfer().broadcast_from_device(0, path); }, Errc::invalid_buffer, 1))
        << path_name(path);
  }
}

TEST_F(MultiGpuBroadcastFromDevice, TooSmallReceiverIsRejectedNamedAndNothingWritten) {
  DeviceMemory& root = register_pattern(0, 2 * kMiB + 1);
  DeviceMemory& small = register_pattern(1, 2 * kMiB);
  for (const DeviceBroadcastPath path : kDeviceBroadcastPaths) {
    EXPECT_TRUE(throws_error_naming([&] { xfer().broadcast_from_device(0, path); }, Errc::invalid_argument, 1))
        << path_name(path);
  }
  EXPECT_TRUE(device_matches(small.ordinal(), small.get(), small.size(), seed(1), 0, "receiver of rejected broadcasts"));
  EXPECT_TRUE(device_matches(root.ordinal(), root.get(), root.size(), seed(0), 0, "root of rejected broadcasts"));
}

// NCCL switched off in the options: the nccl path is refused, automatic falls back to peer copies.
void nccl_off(Options& opts) { opts.enable_nccl = false; }
using MultiGpuBroadcastFromDeviceNoNccl = WithOptions<MultiGpuTest, nccl_off>;

TEST_F(MultiGpuBroadcastFromDeviceNoNccl, NcclPathIsUnsupportedAutomaticWorks) {
  EXPECT_FALSE(manager().nccl_available());
  EXPECT_EQ(manager().nccl_version(), 0);
  const std::size_t bytes = 3 * kMiB + 7;
  DeviceMemory& root = register_pattern(0, bytes);
  DeviceMemory& receiver = register_pattern(1, bytes + kTail);
  EXPECT_TRUE(throws_error([&] { xfer().broadcast_from_device(0, DeviceBroadcastPath::nccl); }, Errc::unsupported));
  EXPECT_TRUE(device_matches(receiver.ordinal(), receiver.get(), receiver.size(), seed(1), 0,
                             "receiver of a refused nccl broadcast"));
  xfer().broadcast_from_device(0, DeviceBroadcastPath::automatic);
  EXPECT_TRUE(device_holds_prefix(receiver, bytes, seed(0), seed(1), "receiver"));
  EXPECT_TRUE(device_matches(root.ordinal(), root.get(), bytes, seed(0), 0, "root"));
}

}  // namespace
}  // namespace gpuxfer::test
