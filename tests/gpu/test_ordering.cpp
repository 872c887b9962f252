// Ordering with the producer: a buffer written by a slow kernel and registered at once is read (and
// written) only after that kernel, whether it ran on a user stream or on the legacy default stream.
#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kBytes = 64 * kMiB;
constexpr std::uint64_t kSpinNs = 200'000'000;  // the producer spins this long before writing

// Each device's buffer: poisoned, then rewritten by a slow kernel on a user stream (or the legacy
// default stream when streams_ is empty) and registered without waiting for it.
class OrderingTest : public GpuTest {
 protected:
  void slow_produce(std::size_t index, DeviceMemory& mem, std::uint64_t fill_seed, bool legacy) {
    poison_device(mem.ordinal(), mem.get(), mem.size());
    const DeviceGuard guard(mem.ordinal());
    if (legacy) {
      pattern::fill_device_slow(mem.get(), mem.size(), fill_seed, kSpinNs, cudaStreamLegacy);
      xfer().set_device_buffer(index, mem.get(), mem.size());
    } else {
      streams_.push_back(std::make_unique<Stream>(mem.ordinal()));
      pattern::fill_device_slow(mem.get(), mem.size(), fill_seed, kSpinNs, streams_.back()->get());
      xfer().set_device_buffer(index, mem.get(), mem.size(), streams_.back()->get());
    }
  }

  std::vector<DeviceMemory*> slow_produce_all(bool legacy) {
    std::vector<DeviceMemory*> memory;
    for (std::size_t i = 0; i < device_count(); ++i) {
      memory.push_back(&allocate(i, kBytes));
      slow_produce(i, *memory.back(), seed(i), legacy);
    }
    return memory;
  }

  // Waits for every producer (so a write the transfer failed to wait for would land before the check).
  void sync_producers() {
    for (std::size_t i = 0; i < device_count(); ++i) {
      const DeviceGuard guard(ordinal(i));
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
  }

  void gather_all_sees_the_producers(bool legacy) {
    slow_produce_all(legacy);
    const auto out = xfer().gather_all();
    ASSERT_EQ(out.size(), device_count());
    for (std::size_t i = 0; i < out.size(); ++i) {
      ASSERT_EQ(out[i].size(), kBytes);
      EXPECT_TRUE(host_matches(out[i].span(), seed(i), 0, "gather_all after a slow producer, device " + std::to_string(i)));
    }
  }

  std::vector<std::unique_ptr<Stream>> streams_;
};

using GpuOrdering = OrderingTest;

TEST_F(GpuOrdering, GatherAllWaitsForAProducerOnAUserStream) { gather_all_sees_the_producers(false); }
TEST_F(GpuOrdering, GatherAllWaitsForAProducerOnTheLegacyDefaultStream) { gather_all_sees_the_producers(true); }

TEST_F(GpuOrdering, GatherIntoWaitsForTheProducer) {
  slow_produce_all(false);
  std::vector<std::byte> out(kBytes * device_count(), kPoison);
  const auto pieces = xfer().gather_into(out);
  ASSERT_EQ(pieces.size(), device_count());
  for (const GatherPiece& p : pieces) {
    EXPECT_TRUE(host_matches(std::span(out).subspan(p.offset, p.size), seed(p.device), 0,
                             "gather_into after a slow producer, device " + std::to_string(p.device)));
  }
}

// A broadcast writes the buffer: it must land after the producer's write, not under it.
TEST_F(GpuOrdering, BroadcastWaitsForTheProducerBeforeWriting) {
  const auto memory = slow_produce_all(false);
  const auto data = pattern_bytes(kBytes - 1, other_seed(0));
  xfer().broadcast(data);
  sync_producers();
  for (std::size_t i = 0; i < memory.size(); ++i) {
    EXPECT_TRUE(device_matches(memory[i]->ordinal(), memory[i]->get(), data.size(), other_seed(0), 0,
                               "broadcast over a slow producer, device " + std::to_string(i)));
    EXPECT_TRUE(device_matches(memory[i]->ordinal(), memory[i]->get() + data.size(), 1, seed(i), data.size(),
                               "last byte, left to the producer"));
  }
}

TEST_F(GpuOrdering, CopyBufferWaitsForTheProducerBeforeWriting) {
  DeviceMemory& mem = allocate(0, kBytes);
  slow_produce(0, mem, seed(0), true);
  const auto data = pattern_bytes(kBytes / 2 + 3, other_seed(0));
  xfer().copy_buffer(0, 0, data);
  sync_producers();
  EXPECT_TRUE(device_matches(mem.ordinal(), mem.get(), data.size(), other_seed(0), 0, "copy over a slow producer"));
  EXPECT_TRUE(device_matches(mem.ordinal(), mem.get() + data.size(), kBytes - data.size(), seed(0), data.size(),
                             "rest of the producer's buffer"));
}

class MultiGpuOrdering : public SmallChunks<OrderingTest> {
 protected:
  [[nodiscard]] std::size_t devices_needed() const override { return 2; }
};

TEST_F(MultiGpuOrdering, GatherHandleWaitsForTheProducers) {
  slow_produce_all(false);
  for (std::size_t dst = 0; dst < device_count(); ++dst) {
    const auto out = xfer().gather(dst).get();
    ASSERT_EQ(out.size(), device_count() - 1);
    for (std::size_t j = 0; j < out.size(); ++j) {
      const std::size_t src = j < dst ? j : j + 1;
      EXPECT_TRUE(host_matches(out[j].span(), seed(src), 0, "device " + std::to_string(src)));
    }
  }
}

TEST_F(MultiGpuOrdering, DeviceCopyWaitsForBothProducers) {
  for (const CopyPath path : {CopyPath::automatic, CopyPath::peer, CopyPath::staged}) {
    if (path == CopyPath::peer && !manager().peer_enabled(0, 1)) continue;
    DeviceMemory& src = allocate(0, kBytes);
    DeviceMemory& dst = allocate(1, kBytes);
    slow_produce(1, dst, seed(1), false);  // the copy must also not be overwritten by dst's producer
    slow_produce(0, src, seed(0), false);
    xfer().copy_device_buffer(0, 1, path);
    sync_producers();
    EXPECT_TRUE(device_matches(dst.ordinal(), dst.get(), kBytes, seed(0), 0, "copy 0 -> 1 over slow producers"));
  }
}

TEST_F(MultiGpuOrdering, BroadcastFromDeviceWaitsForTheProducers) {
  for (const DeviceBroadcastPath path : {DeviceBroadcastPath::automatic, DeviceBroadcastPath::peer}) {
    const auto memory = slow_produce_all(false);
    xfer().broadcast_from_device(1, path);
    sync_producers();
    for (std::size_t i = 0; i < memory.size(); ++i) {
      EXPECT_TRUE(device_matches(memory[i]->ordinal(), memory[i]->get(), kBytes, seed(1), 0,
                                 "broadcast from 1 over slow producers, device " + std::to_string(i)));
    }
  }
}

}  // namespace
}  // namespace gpuxfer::test
