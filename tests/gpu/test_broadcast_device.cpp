// broadcast_from_device(root): the root's buffer into every other device's, for every root and path;
// NCCL switched off; bad input.
#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kTail = 4096 + 5;  // bytes of each receiver past the data, which must not change

std::string path_name(DeviceBroadcastPath path) {
  switch (path) {
    case DeviceBroadcastPath::automatic: return "automatic";
    case DeviceBroadcastPath::nccl: return "nccl";
    case DeviceBroadcastPath::peer: return "peer";
  }
  return "unknown";
}

const DeviceBroadcastPath kPaths[] = {DeviceBroadcastPath::automatic, DeviceBroadcastPath::nccl,
                                      DeviceBroadcastPath::peer};

using Param = std::tuple<DeviceBroadcastPath, std::size_t>;

template <class Base>
class BroadcastFromDeviceBySize : public Base, public ::testing::WithParamInterface<Param> {
 protected:
  [[nodiscard]] DeviceBroadcastPath path() const { return std::get<0>(this->GetParam()); }
  [[nodiscard]] std::size_t bytes() const { return std::get<1>(this->GetParam()); }

  void check_every_root() {
    if (path() == DeviceBroadcastPath::nccl && !this->manager().nccl_available()) {
      GTEST_SKIP() << "NCCL is not available";
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
        EXPECT_TRUE(device_matches(mem.ordinal(), mem.get(), bytes(), this->seed(root), 0, what));
        if (i != root) {
          EXPECT_TRUE(device_matches(mem.ordinal(), mem.get() + bytes(), mem.size() - bytes(), this->seed(i), bytes(),
                                     what + ", bytes past the data"));
        }
      }
    }
  }
};

using GpuBroadcastFromDeviceBySize = BroadcastFromDeviceBySize<GpuTest>;
using MultiGpuBroadcastFromDeviceBySize = BroadcastFromDeviceBySize<MultiGpuTest>;

TEST_P(GpuBroadcastFromDeviceBySize, EveryRoot) { check_every_root(); }
TEST_P(MultiGpuBroadcastFromDeviceBySize, EveryRoot) { check_every_root(); }

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return path_name(std::get<0>(info.param)) + "_" + std::to_string(std::get<1>(info.param));
}
const auto kParams = ::testing::Combine(::testing::ValuesIn(kPaths), ::testing::ValuesIn(kSizes));
INSTANTIATE_TEST_SUITE_P(Bytes, GpuBroadcastFromDeviceBySize, kParams, param_name);
INSTANTIATE_TEST_SUITE_P(Bytes, MultiGpuBroadcastFromDeviceBySize, kParams, param_name);

using GpuBroadcastFromDevice = GpuTest;
using MultiGpuBroadcastFromDevice = MultiGpuTest;

TEST_F(GpuBroadcastFromDevice, RootOutOfRangeIsRejectedAndNamed) {
  for (std::size_t i = 0; i < device_count(); ++i) register_pattern(i, 4096);
  const std::size_t bad = device_count() + 4;
  for (const DeviceBroadcastPath path : kPaths) {
    EXPECT_TRUE(throws_error_naming([&] { xfer().broadcast_from_device(bad, path); }, Errc::invalid_buffer, bad))
        << path_name(path);
  }
}

TEST_F(GpuBroadcastFromDevice, RootWithoutBufferIsRejected) {
  for (std::size_t i = 1; i < device_count(); ++i) register_pattern(i, 4096);
  for (const DeviceBroadcastPath path : kPaths) {
    EXPECT_TRUE(throws_error_naming([&] { xfer().broadcast_from_device(0, path); }, Errc::invalid_buffer, 0))
        << path_name(path);
  }
}

TEST_F(MultiGpuBroadcastFromDevice, ReceiverWithoutBufferIsRejectedAndNamed) {
  register_pattern(0, 4096);
  for (const DeviceBroadcastPath path : kPaths) {
    EXPECT_TRUE(throws_error_naming([&] { xfer().broadcast_from_device(0, path); }, Errc::invalid_buffer, 1))
        << path_name(path);
  }
}

TEST_F(MultiGpuBroadcastFromDevice, TooSmallReceiverIsRejectedNamedAndNothingWritten) {
  DeviceMemory& root = register_pattern(0, 2 * kMiB + 1);
  DeviceMemory& small = register_pattern(1, 2 * kMiB);
  for (const DeviceBroadcastPath path : kPaths) {
    EXPECT_TRUE(throws_error_naming([&] { xfer().broadcast_from_device(0, path); }, Errc::invalid_argument, 1))
        << path_name(path);
  }
  EXPECT_TRUE(device_matches(small.ordinal(), small.get(), small.size(), seed(1), 0, "receiver of rejected broadcasts"));
  EXPECT_TRUE(device_matches(root.ordinal(), root.get(), root.size(), seed(0), 0, "root of rejected broadcasts"));
}

// NCCL switched off in the options: the nccl path is refused, automatic falls back to peer copies.
class MultiGpuBroadcastFromDeviceNoNccl : public MultiGpuTest {
 protected:
  [[nodiscard]] Options options() const override {
    Options opts = MultiGpuTest::options();
    opts.enable_nccl = false;
    return opts;
  }
};

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
  EXPECT_TRUE(device_matches(receiver.ordinal(), receiver.get(), bytes, seed(0), 0, "receiver"));
  EXPECT_TRUE(device_matches(receiver.ordinal(), receiver.get() + bytes, kTail, seed(1), bytes, "receiver past the data"));
  EXPECT_TRUE(device_matches(root.ordinal(), root.get(), bytes, seed(0), 0, "root"));
}

}  // namespace
}  // namespace gpuxfer::test
