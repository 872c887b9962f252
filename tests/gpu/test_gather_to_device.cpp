// gather_to_device: every device's buffer, the destination's own included, concatenated in the
// destination's memory; the capacity and the pointer's device are checked.
#include <cstdlib>
#include <memory>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kTail = 4096;  // poisoned bytes after the payload that the gather must not touch

template <class Base>
class GatherToDeviceBySize : public PerDeviceSizes<Base> {
 protected:
  void check_every_destination() {
    this->register_all();
    const std::vector<GatherPiece> want = this->expected();
    const std::size_t payload = this->total();
    for (std::size_t dst = 0; dst < this->device_count(); ++dst) {
      const std::string where = "gather_to_device(" + std::to_string(dst) + ")";
      DeviceMemory& out = this->allocate(dst, payload + kTail);
      poison_device(out.ordinal(), out.get(), out.size());
      const auto pieces = this->xfer().gather_to_device(dst, out.get(), out.size());
      ASSERT_TRUE(pieces_are_concatenation(pieces, want)) << where;
      for (const GatherPiece& p : pieces) {
        EXPECT_TRUE(device_matches(out.ordinal(), out.get() + p.offset, p.size, this->seed(p.device), 0,
                                   where + ", piece of device " + std::to_string(p.device)));
      }
      std::vector<std::byte> tail(kTail);
      cuda_check(cudaMemcpy(tail.data(), out.get() + payload, kTail, cudaMemcpyDeviceToHost), "read tail");
      EXPECT_TRUE(host_is_poison(tail, where + ", bytes past the payload"));
    }
  }
};

GPUXFER_GPU_AND_MULTI_GPU(GatherToDeviceBySize);

GPUXFER_TEST_P_ON_BOTH(GatherToDeviceBySize, EveryDestination, check_every_destination)

GPUXFER_INSTANTIATE_ON_BOTH(GatherToDeviceBySize, ::testing::ValuesIn(kSizes), size_param_name);

using GpuGatherToDevice = GpuTest;
using MultiGpuGatherToDevice = MultiGpuTest;

TEST_F(GpuGatherToDevice, CapacityTooSmallIsRejected) {
  std::size_t payload = 0;
  for (std::size_t i = 0; i < device_count(); ++i) payload += register_pattern(i, 4095 + i).size();
  DeviceMemory& out = allocate(0, payload);
  poison_device(out.ordinal(), out.get(), out.size());
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_to_device(0, out.get(), payload - 1); }, Errc::invalid_argument));
  std::vector<std::byte> back(payload);
  cuda_check(cudaMemcpy(back.data(), out.get(), payload, cudaMemcpyDeviceToHost), "read back");
  EXPECT_TRUE(host_is_poison(back, "output of a rejected gather_to_device"));
}

TEST_F(GpuGatherToDevice, HostOrNullOutputIsRejected) {
  register_pattern(0, 4095);
  const PinnedMemory pinned(8192);
  const std::unique_ptr<void, decltype(&std::free)> pageable(std::malloc(8192), &std::free);
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_to_device(0, pinned.span().data(), 8192); }, Errc::invalid_buffer));
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_to_device(0, pageable.get(), 8192); }, Errc::invalid_buffer));
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_to_device(0, nullptr, 8192); }, Errc::invalid_buffer));
}

TEST_F(GpuGatherToDevice, DestinationOutOfRangeIsRejected) {
  DeviceMemory& out = allocate(0, 4096);
  const std::size_t bad = device_count();
  EXPECT_TRUE(throws_error_naming([&] { (void)xfer().gather_to_device(bad, out.get(), out.size()); },
                                  Errc::invalid_buffer, bad));
}

TEST_F(MultiGpuGatherToDevice, OutputOnAnotherDeviceIsRejected) {
  GPUXFER_SKIP_ON_ONE_GPU(0, 1, "memory of another GPU");
  register_pattern(0, 4095);
  register_pattern(1, 4096);
  DeviceMemory& on1 = allocate(1, 16 * kKiB);
  poison_device(on1.ordinal(), on1.get(), on1.size());
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_to_device(0, on1.get(), on1.size()); }, Errc::invalid_buffer));
  std::vector<std::byte> back(on1.size());
  cuda_check(cudaMemcpy(back.data(), on1.get(), back.size(), cudaMemcpyDeviceToHost), "read back");
  EXPECT_TRUE(host_is_poison(back, "memory of device 1 passed as device 0's output"));
}

}  // namespace
}  // namespace gpuxfer::test
