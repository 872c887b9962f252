// broadcast(host data): every device, device 0 included, receives every byte on each path, from
// pageable and pinned memory; bytes past the data stay; bad input is rejected before anything is written.
#include "common/paths.hpp"
#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kTail = 4096 + 5;  // bytes of each buffer past the data, which must not change

enum class Source { pageable, pinned };

using Param = std::tuple<HostBroadcastPath, Source, std::size_t>;

template <class Base>
class BroadcastBySize : public SmallChunks<Base>, public ::testing::WithParamInterface<Param> {
 protected:
  [[nodiscard]] HostBroadcastPath path() const { return std::get<0>(this->GetParam()); }
  [[nodiscard]] Source source() const { return std::get<1>(this->GetParam()); }
  [[nodiscard]] std::size_t bytes() const { return std::get<2>(this->GetParam()); }

  void check_every_device() {
    if (path() == HostBroadcastPath::scatter_allgather && this->device_count() > 1 &&
        !this->manager().all_peers_enabled()) {
      GTEST_SKIP() << "scatter_allgather needs peer access between every pair of devices";
    }
    std::vector<DeviceMemory*> memory;
    for (std::size_t i = 0; i < this->device_count(); ++i) {
      memory.push_back(&this->register_pattern(i, bytes() + kTail + 13 * i));
    }
    const std::uint64_t data_seed = this->other_seed(0);
    std::vector<std::byte> pageable;
    std::unique_ptr<PinnedMemory> pinned;
    std::span<const std::byte> data;
    if (source() == Source::pageable) {
      pageable = pattern_bytes(bytes(), data_seed);
      data = pageable;
    } else {
      pinned = std::make_unique<PinnedMemory>(bytes());
      pattern::fill_host(pinned->span(), data_seed);
      data = pinned->span();
    }

    this->xfer().broadcast(data, path());

    for (std::size_t i = 0; i < memory.size(); ++i) {
      const DeviceMemory& mem = *memory[i];
      const std::string what = path_name(path()) + " broadcast, device " + std::to_string(i);
      EXPECT_TRUE(device_holds_prefix(mem, bytes(), data_seed, this->seed(i), what));
    }
  }
};

GPUXFER_GPU_AND_MULTI_GPU(BroadcastBySize);

GPUXFER_TEST_P_ON_BOTH(BroadcastBySize, EveryDeviceReceivesEveryByte, check_every_device)

std::string broadcast_param_name(const ::testing::TestParamInfo<Param>& info) {
  return path_name(std::get<0>(info.param)) + (std::get<1>(info.param) == Source::pageable ? "_pageable_" : "_pinned_") +
         std::to_string(std::get<2>(info.param));
}
const auto kParams = ::testing::Combine(
    ::testing::ValuesIn(kHostBroadcastPaths),
    ::testing::Values(Source::pageable, Source::pinned), ::testing::ValuesIn(kSizes));
GPUXFER_INSTANTIATE_ON_BOTH(BroadcastBySize, kParams, broadcast_param_name);

using GpuBroadcast = SmallChunks<GpuTest>;
using MultiGpuBroadcast = SmallChunks<MultiGpuTest>;

TEST_F(GpuBroadcast, DeviceWithoutBufferIsRejectedAndNamed) {
  const std::size_t last = device_count() - 1;
  for (std::size_t i = 0; i < last; ++i) register_pattern(i, 4096);
  const auto data = pattern_bytes(4096, other_seed(0));
  for (const HostBroadcastPath path : kHostBroadcastPaths) {
    EXPECT_TRUE(throws_error_naming([&] { xfer().broadcast(data, path); }, Errc::invalid_buffer, last))
        << path_name(path);
  }
}

TEST_F(GpuBroadcast, TooSmallBufferIsRejectedNamedAndNothingWritten) {
  const std::size_t last = device_count() - 1;
  std::vector<DeviceMemory*> memory;
  for (std::size_t i = 0; i < device_count(); ++i) memory.push_back(&register_pattern(i, i == last ? 3 * kMiB : 3 * kMiB + 1));
  const auto data = pattern_bytes(3 * kMiB + 1, other_seed(0));
  for (const HostBroadcastPath path : kHostBroadcastPaths) {
    EXPECT_TRUE(throws_error_naming([&] { xfer().broadcast(data, path); }, Errc::invalid_argument, last))
        << path_name(path);
    for (std::size_t i = 0; i < memory.size(); ++i) {
      EXPECT_TRUE(device_matches(memory[i]->ordinal(), memory[i]->get(), memory[i]->size(), seed(i), 0,
                                 path_name(path) + ": device " + std::to_string(i) + " after a rejected broadcast"));
    }
  }
}

TEST_F(GpuBroadcast, NoPinnedAllocationAfterWarmUp) {
  std::vector<DeviceMemory*> memory;
  for (std::size_t i = 0; i < device_count(); ++i) memory.push_back(&register_pattern(i, 16 * kMiB));
  for (const HostBroadcastPath path : kHostBroadcastPaths) {
    if (path == HostBroadcastPath::scatter_allgather && device_count() > 1 && !manager().all_peers_enabled()) continue;
    const auto warm_up = pattern_bytes(16 * kMiB - 3, other_seed(0));
    xfer().broadcast(warm_up, path);
    const std::size_t allocations = manager().pinned_pool().stats().allocations;
    const auto data = pattern_bytes(16 * kMiB - 3, other_seed(1));
    xfer().broadcast(data, path);
    EXPECT_EQ(manager().pinned_pool().stats().allocations, allocations) << path_name(path) << ": cudaHostAlloc on the hot path";
    for (std::size_t i = 0; i < memory.size(); ++i) {
      EXPECT_TRUE(device_matches(memory[i]->ordinal(), memory[i]->get(), data.size(), other_seed(1), 0,
                                 path_name(path) + ": device " + std::to_string(i)));
    }
  }
}

TEST_F(MultiGpuBroadcast, RepeatedBroadcastsOfDifferentSizes) {
  std::vector<DeviceMemory*> memory;
  for (std::size_t i = 0; i < device_count(); ++i) memory.push_back(&register_pattern(i, 40 * kMiB));
  std::uint64_t generation = 0;
  for (const HostBroadcastPath path : kHostBroadcastPaths) {
    if (path == HostBroadcastPath::scatter_allgather && device_count() > 1 && !manager().all_peers_enabled()) continue;
    for (const std::size_t bytes : {std::size_t{40 * kMiB}, std::size_t{3 * kMiB + 1}, std::size_t{kMiB - 1}, std::size_t{5}}) {
      const std::uint64_t data_seed = other_seed(++generation);
      const auto data = pattern_bytes(bytes, data_seed);
      xfer().broadcast(data, path);
      for (std::size_t i = 0; i < memory.size(); ++i) {
        EXPECT_TRUE(device_matches(memory[i]->ordinal(), memory[i]->get(), bytes, data_seed, 0,
                                   path_name(path) + " " + std::to_string(bytes) + " bytes: device " + std::to_string(i)));
      }
    }
  }
}

}  // namespace
}  // namespace gpuxfer::test
