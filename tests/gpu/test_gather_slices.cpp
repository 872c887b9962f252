// gather_slices: many small ranges of several devices packed back to back into host memory, in the
// order given; bad slices and a short output are rejected.
#include <algorithm>
#include <cstdlib>
#include <memory>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kSource = 4 * kMiB;  // each device's source buffer
constexpr std::size_t kTail = 4096;        // poisoned bytes after the payload that must not be touched

struct Expected {
  std::size_t device;
  std::size_t source_offset;  // where the slice starts in its device's pattern
  std::size_t size;
};

template <class Base>
class GatherSlicesTest : public Base {
 protected:
  // Fills every device's source; returns @p count slices of sizes 0..8191 at scattered offsets,
  // cycling through the devices with runs of the same device now and then.
  std::vector<DeviceSlice> make_slices(std::size_t count, std::vector<Expected>& expected) {
    sources_.clear();
    for (std::size_t i = 0; i < this->device_count(); ++i) {
      DeviceMemory& mem = this->allocate(i, kSource);
      fill_device(mem.ordinal(), mem.get(), kSource, this->seed(i));
      sources_.push_back(&mem);
    }
    std::vector<DeviceSlice> slices;
    std::uint64_t state = this->run_ | 1;
    std::size_t device = 0;
    for (std::size_t k = 0; k < count; ++k) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;  // LCG: deterministic per test
      const std::size_t size = (state >> 33) % 8192;
      const std::size_t offset = (state >> 13) % (kSource - size + 1);
      if ((state >> 60) % 3 != 0) device = (device + 1) % this->device_count();
      slices.push_back({device, sources_[device]->get() + offset, size});
      expected.push_back({device, offset, size});
    }
    return slices;
  }

  void check(std::span<const std::byte> out, const std::vector<Expected>& expected, std::size_t written,
             const std::string& what) {
    std::size_t at = 0;
    for (std::size_t k = 0; k < expected.size(); ++k) {
      const Expected& e = expected[k];
      const auto bytes = out.subspan(at, e.size);
      if (pattern::count_mismatches_host(bytes, this->seed(e.device), e.source_offset) != 0) {
        ADD_FAILURE() << host_matches(bytes, this->seed(e.device), e.source_offset,
                                      what + ", slice " + std::to_string(k) + " of device " +
                                          std::to_string(e.device) + " at output offset " + std::to_string(at))
                             .message();
        return;
      }
      at += e.size;
    }
    EXPECT_EQ(written, at);
    EXPECT_TRUE(host_is_poison(out.subspan(at), what + ", bytes past the payload"));
  }

  void check_a_thousand_slices() {
    std::vector<Expected> expected;
    const auto slices = make_slices(1000, expected);
    std::size_t total = 0;
    for (const Expected& e : expected) total += e.size;

    std::vector<std::byte> pageable(total + kTail, kPoison);
    check(pageable, expected, this->xfer().gather_slices(slices, pageable), "pageable output");

    const PinnedMemory pinned(total + kTail);
    std::fill(pinned.span().begin(), pinned.span().end(), kPoison);
    check(pinned.span(), expected, this->xfer().gather_slices(slices, pinned.span()), "pinned output");
  }

  std::vector<DeviceMemory*> sources_;
};

using GpuGatherSlices = GatherSlicesTest<GpuTest>;
using MultiGpuGatherSlices = GatherSlicesTest<MultiGpuTest>;

TEST_F(GpuGatherSlices, AThousandSlicesPageableAndPinned) { check_a_thousand_slices(); }
TEST_F(MultiGpuGatherSlices, AThousandSlicesPageableAndPinned) { check_a_thousand_slices(); }

TEST_F(GpuGatherSlices, NoSlicesWriteNothing) {
  std::vector<std::byte> out(kTail, kPoison);
  EXPECT_EQ(xfer().gather_slices({}, out), 0u);
  EXPECT_TRUE(host_is_poison(out, "output of no slices"));
}

TEST_F(GpuGatherSlices, OutputTooSmallIsRejected) {
  std::vector<Expected> expected;
  const auto slices = make_slices(10, expected);
  std::size_t total = 0;
  for (const Expected& e : expected) total += e.size;
  std::vector<std::byte> out(total - 1, kPoison);
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_slices(slices, out); }, Errc::invalid_argument));
  EXPECT_TRUE(host_is_poison(out, "output of a rejected gather_slices"));
}

TEST_F(GpuGatherSlices, BadSlicesAreRejected) {
  DeviceMemory& mem = allocate(0, kSource);
  const std::size_t bad = device_count();
  const PinnedMemory host(64);
  std::vector<std::byte> out(2 * kSource);
  const DeviceSlice out_of_range[] = {{bad, mem.get(), 16}};
  EXPECT_TRUE(throws_error_naming([&] { (void)xfer().gather_slices(out_of_range, out); }, Errc::invalid_buffer, bad));
  const DeviceSlice past_end[] = {{0, mem.get() + kSource - 8, 16}};
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_slices(past_end, out); }, Errc::invalid_buffer));
  const DeviceSlice host_memory[] = {{0, host.span().data(), 16}};
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_slices(host_memory, out); }, Errc::invalid_buffer));
  const DeviceSlice null_ptr[] = {{0, nullptr, 16}};
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_slices(null_ptr, out); }, Errc::invalid_buffer));
}

TEST_F(MultiGpuGatherSlices, SliceOfAnotherDeviceIsRejected) {
  GPUXFER_SKIP_ON_ONE_GPU(0, 1, "memory of another GPU");
  DeviceMemory& on1 = allocate(1, 4096);
  std::vector<std::byte> out(4096);
  const DeviceSlice wrong[] = {{0, on1.get(), 16}};
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_slices(wrong, out); }, Errc::invalid_buffer));
}

}  // namespace
}  // namespace gpuxfer::test
