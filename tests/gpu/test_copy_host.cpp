// copy_buffer: host bytes (pageable or pinned) into the start of a device's registered buffer; the
// rest of the buffer keeps its bytes; bad input is rejected before anything is written.
#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kTail = 4096 + 5;  // bytes of the destination past the data, which must not change

enum class Source { pageable, pinned };

template <class Base>
class CopyHostBySize : public SmallChunks<Base>, public ::testing::WithParamInterface<std::tuple<Source, std::size_t>> {
 protected:
  [[nodiscard]] Source source() const { return std::get<0>(this->GetParam()); }
  [[nodiscard]] std::size_t bytes() const { return std::get<1>(this->GetParam()); }

  // Host data of this test in memory of the source kind under test; span() is valid while it lives.
  struct HostData {
    std::vector<std::byte> pageable;
    std::unique_ptr<PinnedMemory> pinned;
    std::span<const std::byte> span;
  };

  [[nodiscard]] HostData host_data(std::uint64_t data_seed) const {
    HostData data;
    if (source() == Source::pageable) {
      data.pageable = pattern_bytes(bytes(), data_seed);
      data.span = data.pageable;
    } else {
      data.pinned = std::make_unique<PinnedMemory>(bytes());
      pattern::fill_host(data.pinned->span(), data_seed);
      data.span = data.pinned->span();
    }
    return data;
  }

  // Copies into every device from every source index and checks the data and the untouched tail.
  void check_every_pair() {
    std::vector<DeviceMemory*> dst_memory;
    for (std::size_t i = 0; i < this->device_count(); ++i) {
      dst_memory.push_back(&this->register_pattern(i, bytes() + kTail));
    }
    std::uint64_t generation = 0;
    for (std::size_t src = 0; src < this->device_count(); ++src) {
      for (std::size_t dst = 0; dst < this->device_count(); ++dst) {
        const std::uint64_t data_seed = this->other_seed(++generation);
        const HostData data = host_data(data_seed);
        DeviceMemory& mem = *dst_memory[dst];
        fill_device(mem.ordinal(), mem.get(), mem.size(), this->seed(dst));
        this->xfer().copy_buffer(src, dst, data.span);
        const std::string what = "copy_buffer(" + std::to_string(src) + ", " + std::to_string(dst) + ")";
        EXPECT_TRUE(device_matches(mem.ordinal(), mem.get(), bytes(), data_seed, 0, what + " data"));
        EXPECT_TRUE(device_matches(mem.ordinal(), mem.get() + bytes(), kTail, this->seed(dst), bytes(),
                                   what + " bytes past the data"));
      }
    }
  }
};

using GpuCopyHostBySize = CopyHostBySize<GpuTest>;
using MultiGpuCopyHostBySize = CopyHostBySize<MultiGpuTest>;

TEST_P(GpuCopyHostBySize, IntoEveryDevice) { check_every_pair(); }
TEST_P(MultiGpuCopyHostBySize, IntoEveryDeviceFromEverySource) { check_every_pair(); }

std::string copy_param_name(const ::testing::TestParamInfo<std::tuple<Source, std::size_t>>& info) {
  return std::string(std::get<0>(info.param) == Source::pageable ? "pageable_" : "pinned_") +
         std::to_string(std::get<1>(info.param));
}
INSTANTIATE_TEST_SUITE_P(Bytes, GpuCopyHostBySize,
                         ::testing::Combine(::testing::Values(Source::pageable, Source::pinned),
                                            ::testing::ValuesIn(kSizes)),
                         copy_param_name);
INSTANTIATE_TEST_SUITE_P(Bytes, MultiGpuCopyHostBySize,
                         ::testing::Combine(::testing::Values(Source::pageable, Source::pinned),
                                            ::testing::ValuesIn(kSizes)),
                         copy_param_name);

using GpuCopyHost = SmallChunks<GpuTest>;

TEST_F(GpuCopyHost, DataLargerThanTheDestinationIsRejectedAndNothingWritten) {
  DeviceMemory& mem = register_pattern(0, kMiB + 7);
  const auto pageable = pattern_bytes(kMiB + 8, other_seed(0));
  EXPECT_TRUE(throws_error([&] { xfer().copy_buffer(0, 0, pageable); }, Errc::invalid_argument));
  const PinnedMemory pinned(2 * kMiB);
  pattern::fill_host(pinned.span(), other_seed(1));
  EXPECT_TRUE(throws_error([&] { xfer().copy_buffer(0, 0, pinned.span()); }, Errc::invalid_argument));
  EXPECT_TRUE(device_matches(mem.ordinal(), mem.get(), mem.size(), seed(0), 0, "destination of rejected copies"));
}

TEST_F(GpuCopyHost, DestinationWithoutBufferIsRejected) {
  const auto data = pattern_bytes(4095, other_seed(0));
  EXPECT_TRUE(throws_error_naming([&] { xfer().copy_buffer(0, 0, data); }, Errc::invalid_buffer, 0));
}

TEST_F(GpuCopyHost, IndexOutOfRangeIsRejectedAndNamed) {
  register_pattern(0, 4095);
  const auto data = pattern_bytes(16, other_seed(0));
  const std::size_t bad = device_count() + 3;
  EXPECT_TRUE(throws_error_naming([&] { xfer().copy_buffer(bad, 0, data); }, Errc::invalid_buffer, bad));
  EXPECT_TRUE(throws_error_naming([&] { xfer().copy_buffer(0, bad, data); }, Errc::invalid_buffer, bad));
}

TEST_F(GpuCopyHost, DataFromAnInteriorOfPinnedMemory) {
  DeviceMemory& mem = register_pattern(0, 3 * kMiB + kTail);
  const PinnedMemory pinned(3 * kMiB + 64);
  pattern::fill_host(pinned.span(), other_seed(0));
  // An unaligned slice of a pinned allocation: still pinned, so it may be DMA'd directly.
  xfer().copy_buffer(0, 0, pinned.span().subspan(3, 3 * kMiB + 1));
  EXPECT_TRUE(device_matches(mem.ordinal(), mem.get(), 3 * kMiB + 1, other_seed(0), 3, "slice of pinned data"));
  EXPECT_TRUE(device_matches(mem.ordinal(), mem.get() + 3 * kMiB + 1, mem.size() - 3 * kMiB - 1, seed(0),
                             3 * kMiB + 1, "bytes past the data"));
}

TEST_F(GpuCopyHost, NoPinnedAllocationAfterWarmUp) {
  DeviceMemory& mem = register_pattern(0, 32 * kMiB);
  const auto first = pattern_bytes(32 * kMiB - 5, other_seed(0));
  xfer().copy_buffer(0, 0, first);
  const std::size_t allocations = manager().pinned_pool().stats().allocations;
  const auto second = pattern_bytes(32 * kMiB - 5, other_seed(1));
  xfer().copy_buffer(0, 0, second);
  EXPECT_EQ(manager().pinned_pool().stats().allocations, allocations) << "cudaHostAlloc on the hot path";
  EXPECT_TRUE(device_matches(mem.ordinal(), mem.get(), second.size(), other_seed(1), 0, "second copy"));
}

}  // namespace
}  // namespace gpuxfer::test
