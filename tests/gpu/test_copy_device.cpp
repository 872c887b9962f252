// copy_device_buffer(_async): one device's registered buffer into the start of another's, over each
// path, both directions, many chunks; peer access switched off; bad input.
#include <chrono>
#include <thread>

#include "common/paths.hpp"
#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kTail = 4096 + 5;  // bytes of the destination past the copy, which must not change

// Two devices with small chunks; copy(src, dst, bytes, path) checks every byte of both buffers.
class CopyDeviceTest : public SmallChunks<MultiGpuTest> {
 protected:
  // Why @p path cannot run between devices 0 and 1 here, or an empty string.
  std::string unavailable(CopyPath path) {
    if (path != CopyPath::peer || manager().peer_enabled(0, 1)) return {};
    return "no peer access between devices 0 and 1 (link " + std::string(to_string(manager().link(0, 1))) + ")";
  }

  struct Pair {
    DeviceMemory* src;
    DeviceMemory* dst;
  };

  Pair register_pair(std::size_t src, std::size_t dst, std::size_t bytes) {
    return {&register_pattern(src, bytes), &register_pattern(dst, bytes + kTail)};
  }

  void expect_copied(std::size_t src, std::size_t dst, const Pair& pair, std::size_t bytes, const std::string& what) {
    EXPECT_TRUE(device_holds_prefix(*pair.dst, bytes, seed(src), seed(dst), what + ": destination"));
    EXPECT_TRUE(device_matches(pair.src->ordinal(), pair.src->get(), bytes, seed(src), 0, what + ": source"));
  }
};

class MultiGpuCopyDeviceBySize : public CopyDeviceTest,
                                 public ::testing::WithParamInterface<std::tuple<CopyPath, std::size_t>> {
 protected:
  [[nodiscard]] CopyPath path() const { return std::get<0>(GetParam()); }
  [[nodiscard]] std::size_t bytes() const { return std::get<1>(GetParam()); }
};

TEST_P(MultiGpuCopyDeviceBySize, BothDirections) {
  if (const std::string why = unavailable(path()); !why.empty()) GTEST_SKIP() << why;
  for (const auto& [src, dst] : {std::pair<std::size_t, std::size_t>{0, 1}, {1, 0}}) {
    const Pair pair = register_pair(src, dst, bytes());
    xfer().copy_device_buffer(src, dst, path());
    expect_copied(src, dst, pair, bytes(), path_name(path()) + " copy " + std::to_string(src) + " -> " + std::to_string(dst));
  }
}

TEST_P(MultiGpuCopyDeviceBySize, AsyncThenWait) {
  if (const std::string why = unavailable(path()); !why.empty()) GTEST_SKIP() << why;
  for (const auto& [src, dst] : {std::pair<std::size_t, std::size_t>{0, 1}, {1, 0}}) {
    const Pair pair = register_pair(src, dst, bytes());
    TransferHandle handle = xfer().copy_device_buffer_async(src, dst, path());
    handle.wait();
    EXPECT_TRUE(handle.ready());
    expect_copied(src, dst, pair, bytes(), path_name(path()) + " async copy " + std::to_string(src) + " -> " + std::to_string(dst));
  }
}

INSTANTIATE_TEST_SUITE_P(Bytes, MultiGpuCopyDeviceBySize,
                         ::testing::Combine(::testing::ValuesIn(kCopyPaths),
                                            ::testing::ValuesIn(kSizes)),
                         path_size_name<CopyPath>);

using MultiGpuCopyDevice = CopyDeviceTest;

TEST_F(MultiGpuCopyDevice, DroppedAsyncCopyStillLands) {
  for (const CopyPath path : {CopyPath::peer, CopyPath::staged}) {
    if (path == CopyPath::peer && !manager().peer_enabled(0, 1)) continue;
    const Pair pair = register_pair(0, 1, 64 * kMiB + 3);
    static_cast<void>(xfer().copy_device_buffer_async(0, 1, path));  // never waited on
    // A deadline, not a timing assertion: staging blocks return once the GPU is done with them.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (manager().pinned_pool().stats().in_use != 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(manager().pinned_pool().stats().in_use, 0u) << path_name(path);
    for (std::size_t i = 0; i < 2; ++i) {
      const DeviceGuard guard(ordinal(i));
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
    expect_copied(0, 1, pair, 64 * kMiB + 3, "dropped " + path_name(path) + " copy");
  }
}

TEST_F(MultiGpuCopyDevice, SourceLargerThanDestinationIsRejected) {
  DeviceMemory& src = register_pattern(0, kMiB + 8);
  DeviceMemory& dst = register_pattern(1, kMiB + 7);
  for (const CopyPath path : kCopyPaths) {
    EXPECT_TRUE(throws_error([&] { xfer().copy_device_buffer(0, 1, path); }, Errc::invalid_argument)) << path_name(path);
    EXPECT_TRUE(throws_error([&] { (void)xfer().copy_device_buffer_async(0, 1, path); }, Errc::invalid_argument))
        << path_name(path);
  }
  EXPECT_TRUE(device_matches(dst.ordinal(), dst.get(), dst.size(), seed(1), 0, "destination of rejected copies"));
  static_cast<void>(src);
}

TEST_F(MultiGpuCopyDevice, MissingBufferIsRejectedAndNamed) {
  register_pattern(0, 4095);
  EXPECT_TRUE(throws_error_naming([&] { xfer().copy_device_buffer(0, 1); }, Errc::invalid_buffer, 1));
  EXPECT_TRUE(throws_error_naming([&] { xfer().copy_device_buffer(1, 0); }, Errc::invalid_buffer, 1));
  EXPECT_TRUE(throws_error_naming([&] { (void)xfer().copy_device_buffer_async(1, 0); }, Errc::invalid_buffer, 1));
}

using GpuCopyDevice = GpuTest;

TEST_F(GpuCopyDevice, SameDeviceIsRejected) {
  register_pattern(0, 4095);
  EXPECT_TRUE(throws_error([&] { xfer().copy_device_buffer(0, 0); }, Errc::invalid_argument));
  EXPECT_TRUE(throws_error([&] { (void)xfer().copy_device_buffer_async(0, 0); }, Errc::invalid_argument));
}

TEST_F(GpuCopyDevice, IndexOutOfRangeIsRejectedAndNamed) {
  register_pattern(0, 4095);
  const std::size_t bad = device_count() + 2;
  EXPECT_TRUE(throws_error_naming([&] { xfer().copy_device_buffer(0, bad); }, Errc::invalid_buffer, bad));
  EXPECT_TRUE(throws_error_naming([&] { xfer().copy_device_buffer(bad, 0); }, Errc::invalid_buffer, bad));
  EXPECT_TRUE(throws_error_naming([&] { (void)xfer().copy_device_buffer_async(bad, 0); }, Errc::invalid_buffer, bad));
}

// A manager told not to enable peer access: the peer path is refused, the others copy through the host.
void peer_off(Options& opts) { opts.enable_peer_access = false; }
class MultiGpuCopyDeviceNoPeer : public WithOptions<CopyDeviceTest, peer_off>,
                                 public ::testing::WithParamInterface<std::size_t> {};

TEST_P(MultiGpuCopyDeviceNoPeer, PeerIsUnsupportedOthersAreStaged) {
  EXPECT_FALSE(manager().peer_enabled(0, 1));
  EXPECT_FALSE(manager().all_peers_enabled());
  const std::size_t bytes = GetParam();
  for (const auto& [src, dst] : {std::pair<std::size_t, std::size_t>{0, 1}, {1, 0}}) {
    const Pair pair = register_pair(src, dst, bytes);
    EXPECT_TRUE(throws_error([&] { xfer().copy_device_buffer(src, dst, CopyPath::peer); }, Errc::unsupported));
    EXPECT_TRUE(device_matches(pair.dst->ordinal(), pair.dst->get(), pair.dst->size(), seed(dst), 0,
                               "destination of a refused peer copy"));
    for (const CopyPath path : {CopyPath::automatic, CopyPath::staged}) {
      fill_device(pair.dst->ordinal(), pair.dst->get(), pair.dst->size(), seed(dst));
      xfer().copy_device_buffer(src, dst, path);
      expect_copied(src, dst, pair, bytes, path_name(path) + " copy without peer access " + std::to_string(src) +
                                               " -> " + std::to_string(dst));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Bytes, MultiGpuCopyDeviceNoPeer, ::testing::Values(std::size_t{1}, std::size_t{4095}, kMiB + 7, 64 * kMiB + 3),
                         size_param_name);

}  // namespace
}  // namespace gpuxfer::test
