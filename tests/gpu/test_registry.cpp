// set_device_buffer / device_buffer / clear_device_buffer on real devices: what is accepted, what is
// rejected with which code, and that a rejected call leaves the registry as it was.
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

using GpuRegistry = GpuTest;
using MultiGpuRegistry = MultiGpuTest;

// Multiples of 2 MiB, so that no allocation granularity can hide a size past the end.
constexpr std::size_t kAlloc = 4 * kMiB;

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};

TEST_F(GpuRegistry, NothingIsRegisteredAtStart) {
  for (std::size_t i = 0; i < device_count(); ++i) EXPECT_FALSE(xfer().device_buffer(i).has_value()) << i;
}

TEST_F(GpuRegistry, DeviceBufferReturnsTheRegistration) {
  DeviceMemory& mem = allocate(0, kAlloc);
  xfer().set_device_buffer(0, mem.get(), 1000);
  const auto reg = xfer().device_buffer(0);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->ptr, mem.get());
  EXPECT_EQ(reg->size, 1000u);
}

TEST_F(GpuRegistry, LaterRegistrationReplacesTheEarlierOne) {
  DeviceMemory& first = register_pattern(0, 4095, other_seed(0));
  DeviceMemory& second = register_pattern(0, 3000);
  const auto reg = xfer().device_buffer(0);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->ptr, second.get());
  EXPECT_NE(reg->ptr, first.get());
  EXPECT_EQ(reg->size, 3000u);
  const auto out = xfer().gather_all();
  ASSERT_EQ(out.size(), device_count());
  ASSERT_EQ(out[0].size(), 3000u);
  EXPECT_TRUE(host_matches(out[0].span(), seed(0), 0, "device 0 after re-registration"));
}

TEST_F(GpuRegistry, ClearForgetsTheRegistration) {
  register_pattern(0, 4095);
  xfer().clear_device_buffer(0);
  EXPECT_FALSE(xfer().device_buffer(0).has_value());
  const auto out = xfer().gather_all();
  ASSERT_EQ(out.size(), device_count());
  EXPECT_TRUE(out[0].empty());
  EXPECT_NO_THROW(xfer().clear_device_buffer(0)) << "clearing twice";
}

TEST_F(GpuRegistry, ZeroSizeWithAValidPointerIsAccepted) {
  DeviceMemory& mem = allocate(0, 256);
  ASSERT_NO_THROW(xfer().set_device_buffer(0, mem.get(), 0));
  const auto reg = xfer().device_buffer(0);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->ptr, mem.get());
  EXPECT_EQ(reg->size, 0u);
  const auto out = xfer().gather_all();
  ASSERT_EQ(out.size(), device_count());
  EXPECT_TRUE(out[0].empty());
}

TEST_F(GpuRegistry, NullPointerIsRejected) {
  EXPECT_TRUE(throws_error([&] { xfer().set_device_buffer(0, nullptr, 16); }, Errc::invalid_buffer));
  EXPECT_TRUE(throws_error([&] { xfer().set_device_buffer(0, nullptr, 0); }, Errc::invalid_buffer));
  EXPECT_FALSE(xfer().device_buffer(0).has_value());
}

TEST_F(GpuRegistry, PageableHostPointerIsRejected) {
  const std::unique_ptr<void, FreeDeleter> host(std::malloc(4096));
  ASSERT_NE(host, nullptr);
  EXPECT_TRUE(throws_error([&] { xfer().set_device_buffer(0, host.get(), 4096); }, Errc::invalid_buffer));
  EXPECT_FALSE(xfer().device_buffer(0).has_value());
}

TEST_F(GpuRegistry, PinnedHostPointerIsRejected) {
  const PinnedMemory host(4096);
  EXPECT_TRUE(throws_error([&] { xfer().set_device_buffer(0, host.span().data(), 4096); }, Errc::invalid_buffer));
  EXPECT_FALSE(xfer().device_buffer(0).has_value());
}

TEST_F(GpuRegistry, IndexOutOfRangeIsRejectedAndNamed) {
  DeviceMemory& mem = allocate(0, 64);
  const std::size_t bad = device_count();
  Stream stream(ordinal(0));
  EXPECT_TRUE(throws_error_naming([&] { xfer().set_device_buffer(bad, mem.get(), 64); }, Errc::invalid_buffer, bad));
  EXPECT_TRUE(throws_error_naming([&] { xfer().set_device_buffer(bad, mem.get(), 64, stream.get()); },
                                  Errc::invalid_buffer, bad));
  EXPECT_TRUE(throws_error_naming([&] { xfer().clear_device_buffer(bad); }, Errc::invalid_buffer, bad));
  EXPECT_TRUE(throws_error_naming([&] { (void)xfer().device_buffer(bad); }, Errc::invalid_buffer, bad));
}

TEST_F(GpuRegistry, WholeAllocationIsAcceptedOneBytePastItsEndIsNot) {
  DeviceMemory& mem = allocate(0, kAlloc);
  EXPECT_TRUE(throws_error([&] { xfer().set_device_buffer(0, mem.get(), kAlloc + 1); }, Errc::invalid_buffer));
  EXPECT_TRUE(throws_error([&] { xfer().set_device_buffer(0, mem.get(), 2 * kAlloc); }, Errc::invalid_buffer));
  EXPECT_FALSE(xfer().device_buffer(0).has_value());
  EXPECT_NO_THROW(xfer().set_device_buffer(0, mem.get(), kAlloc));
}

TEST_F(GpuRegistry, InteriorPointerThatFitsIsAcceptedAndRead) {
  DeviceMemory& mem = allocate(0, kAlloc);
  fill_device(mem.ordinal(), mem.get(), kAlloc, seed(0));
  const std::size_t offset = kMiB + 3;
  const std::size_t size = kAlloc - offset;
  ASSERT_NO_THROW(xfer().set_device_buffer(0, mem.get() + offset, size));
  const auto reg = xfer().device_buffer(0);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->ptr, mem.get() + offset);
  EXPECT_EQ(reg->size, size);
  const auto out = xfer().gather_all();
  ASSERT_EQ(out[0].size(), size);
  EXPECT_TRUE(host_matches(out[0].span(), seed(0), offset, "interior buffer of device 0"));
}

TEST_F(GpuRegistry, InteriorPointerThatOverflowsIsRejected) {
  DeviceMemory& mem = allocate(0, kAlloc);
  const std::size_t offset = kMiB + 3;
  EXPECT_TRUE(throws_error([&] { xfer().set_device_buffer(0, mem.get() + offset, kAlloc - offset + 1); },
                           Errc::invalid_buffer));
  EXPECT_TRUE(throws_error([&] { xfer().set_device_buffer(0, mem.get() + offset, kAlloc); }, Errc::invalid_buffer));
  EXPECT_FALSE(xfer().device_buffer(0).has_value());
}

TEST_F(GpuRegistry, RejectedRegistrationKeepsTheEarlierOne) {
  DeviceMemory& good = register_pattern(0, 4095);
  EXPECT_TRUE(throws_error([&] { xfer().set_device_buffer(0, nullptr, 16); }, Errc::invalid_buffer));
  EXPECT_TRUE(throws_error([&] { xfer().set_device_buffer(0, good.get(), kAlloc * 64); }, Errc::invalid_buffer));
  const auto reg = xfer().device_buffer(0);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->ptr, good.get());
  EXPECT_EQ(reg->size, 4095u);
  const auto out = xfer().gather_all();
  EXPECT_TRUE(host_matches(out[0].span(), seed(0), 0, "device 0 after rejected registrations"));
}

// Device 0's buffer is freed right before each operation, with no allocation in between that could
// reuse the address.
TEST_F(GpuRegistry, FreedBufferIsDetectedByTheNextOperation) {
  for (std::size_t i = 1; i < device_count(); ++i) register_pattern(i, kMiB);  // only device 0 goes stale
  DeviceMemory& gathered = register_pattern(0, kMiB);
  gathered.free_now();
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_all(); }, Errc::invalid_buffer)) << "gather_all";

  DeviceMemory& broadcast_into = register_pattern(0, kMiB);
  broadcast_into.free_now();
  const auto data = pattern_bytes(4096, other_seed(0));
  EXPECT_TRUE(throws_error([&] { xfer().broadcast(data); }, Errc::invalid_buffer)) << "broadcast";

  DeviceMemory& copied_into = register_pattern(0, kMiB);
  copied_into.free_now();
  EXPECT_TRUE(throws_error([&] { xfer().copy_buffer(0, 0, data); }, Errc::invalid_buffer)) << "copy_buffer";

  DeviceMemory& gathered_into = register_pattern(0, kMiB);
  gathered_into.free_now();
  std::vector<std::byte> out(kMiB);
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_into(out); }, Errc::invalid_buffer)) << "gather_into";

  // The engine still works once the stale registration is replaced.
  register_pattern(0, 4095);
  const auto result = xfer().gather_all();
  EXPECT_TRUE(host_matches(result[0].span(), seed(0), 0, "device 0 after a freed buffer"));
}

// A thread that never called CUDA has no current context: registering and gathering must still work.
TEST_F(GpuRegistry, RegistrationAndGatherFromAFreshThread) {
  DeviceMemory& mem = allocate(0, kMiB + 7);
  fill_device(mem.ordinal(), mem.get(), mem.size(), seed(0));
  const auto errors = run_threads(1, [&](std::size_t) {
    xfer().set_device_buffer(0, mem.get(), mem.size());
    const auto out = xfer().gather_all();
    if (pattern::count_mismatches_host(out[0].span(), seed(0)) != 0) throw std::runtime_error("gathered bytes differ");
  });
  EXPECT_TRUE(errors.empty()) << (errors.empty() ? std::string() : errors.front());
}

TEST_F(MultiGpuRegistry, PointerOfAnotherDeviceIsRejected) {
  GPUXFER_SKIP_ON_ONE_GPU(0, 1, "memory of another GPU");
  DeviceMemory& on1 = allocate(1, 4096);
  DeviceMemory& on0 = allocate(0, 4096);
  EXPECT_TRUE(throws_error([&] { xfer().set_device_buffer(0, on1.get(), 4096); }, Errc::invalid_buffer));
  EXPECT_TRUE(throws_error([&] { xfer().set_device_buffer(1, on0.get(), 4096); }, Errc::invalid_buffer));
  EXPECT_FALSE(xfer().device_buffer(0).has_value());
  EXPECT_FALSE(xfer().device_buffer(1).has_value());
  EXPECT_NO_THROW(xfer().set_device_buffer(0, on0.get(), 4096));
  EXPECT_NO_THROW(xfer().set_device_buffer(1, on1.get(), 4096));
}

TEST_F(MultiGpuRegistry, DevicesAreRegisteredIndependently) {
  DeviceMemory& on0 = register_pattern(0, 4095);
  DeviceMemory& on1 = register_pattern(1, 3);
  xfer().clear_device_buffer(0);
  EXPECT_FALSE(xfer().device_buffer(0).has_value());
  const auto reg1 = xfer().device_buffer(1);
  ASSERT_TRUE(reg1.has_value());
  EXPECT_EQ(reg1->ptr, on1.get());
  EXPECT_EQ(reg1->size, 3u);
  static_cast<void>(on0);
  const auto out = xfer().gather_all();
  ASSERT_EQ(out.size(), device_count());
  EXPECT_TRUE(out[0].empty());
  ASSERT_EQ(out[1].size(), 3u);
  EXPECT_TRUE(host_matches(out[1].span(), seed(1), 0, "device 1"));
}

}  // namespace
}  // namespace gpuxfer::test
