// Ordering with the producer: a buffer written by a slow kernel and registered at once is read (and
// written) only after that kernel, whether it ran on a user stream or on the legacy default stream.
#include <utility>

#include "common/paths.hpp"
#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kBytes = 64 * kMiB;
constexpr std::uint64_t kSpinNs = 200'000'000;  // the producer spins this long before writing

// Each device's buffer: poisoned, then rewritten by a slow kernel on a user stream (or the legacy
// default stream) and registered without waiting for it. Every test runs its operation once first, on the
// poisoned buffers, so that the pinned pool holds its staging (and the NCCL communicator exists): a first
// cudaHostAlloc or NCCL set-up between the producer and the copy may synchronise the device, which would
// order them whatever gpuxfer does. It then asserts that the producers still run as the operation starts.
class OrderingTest : public GpuTest {
 protected:
  // Device @p index's buffer of kBytes, poisoned and registered: what the warm-up call runs on.
  DeviceMemory& poisoned(std::size_t index) {
    DeviceMemory& mem = allocate(index, kBytes);
    poison_device(mem.ordinal(), mem.get(), mem.size());
    xfer().set_device_buffer(index, mem.get(), mem.size());
    return mem;
  }

  std::vector<DeviceMemory*> poisoned_all() {
    std::vector<DeviceMemory*> memory;
    for (std::size_t i = 0; i < device_count(); ++i) memory.push_back(&poisoned(i));
    return memory;
  }

  // Poisons @p mem, then queues its slow producer. Poisoning synchronises the device: with several
  // devices on one GPU (simulated), poison them all first (slow_produce_all, poisoned = true), so that no
  // poisoning waits for a producer already queued.
  void slow_produce(std::size_t index, DeviceMemory& mem, std::uint64_t fill_seed, bool legacy,
                    bool poisoned = false) {
    if (!poisoned) poison_device(mem.ordinal(), mem.get(), mem.size());
    const DeviceGuard guard(mem.ordinal());
    if (legacy) {
      pattern::fill_device_slow(mem.get(), mem.size(), fill_seed, kSpinNs, cudaStreamLegacy);
      xfer().set_device_buffer(index, mem.get(), mem.size());
      producers_.emplace_back(mem.ordinal(), cudaStreamLegacy);
    } else {
      streams_.push_back(std::make_unique<Stream>(mem.ordinal()));
      pattern::fill_device_slow(mem.get(), mem.size(), fill_seed, kSpinNs, streams_.back()->get());
      xfer().set_device_buffer(index, mem.get(), mem.size(), streams_.back()->get());
      producers_.emplace_back(mem.ordinal(), streams_.back()->get());
    }
  }

  void slow_produce_all(const std::vector<DeviceMemory*>& memory, bool legacy) {
    for (DeviceMemory* mem : memory) poison_device(mem->ordinal(), mem->get(), mem->size());
    for (std::size_t i = 0; i < memory.size(); ++i) slow_produce(i, *memory[i], seed(i), legacy, true);
  }

  // Every producer queued since the last call still runs: the operation that follows starts inside their
  // window.
  ::testing::AssertionResult producers_still_running() {
    for (const auto& [device, stream] : std::exchange(producers_, {})) {
      auto running = still_running(device, stream, "the producer on CUDA device " + std::to_string(device));
      if (!running) return running;
    }
    return ::testing::AssertionSuccess();
  }

  // Waits for every producer (so a write the transfer failed to wait for would land before the check).
  void sync_producers() {
    for (std::size_t i = 0; i < device_count(); ++i) {
      const DeviceGuard guard(ordinal(i));
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
  }

  void gather_all_sees_the_producers(bool legacy) {
    const auto memory = poisoned_all();
    (void)xfer().gather_all();  // warm-up: the pool then holds the results' blocks, of poison
    slow_produce_all(memory, legacy);
    ASSERT_TRUE(producers_still_running());
    const auto out = xfer().gather_all();
    ASSERT_EQ(out.size(), device_count());
    for (std::size_t i = 0; i < out.size(); ++i) {
      ASSERT_EQ(out[i].size(), kBytes);
      EXPECT_TRUE(host_matches(out[i].span(), seed(i), 0, "gather_all after a slow producer, device " + std::to_string(i)));
    }
  }

  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::pair<int, cudaStream_t>> producers_;  // {CUDA device, stream} queued since the last check
};

using GpuOrdering = OrderingTest;

TEST_F(GpuOrdering, GatherAllWaitsForAProducerOnAUserStream) { gather_all_sees_the_producers(false); }
TEST_F(GpuOrdering, GatherAllWaitsForAProducerOnTheLegacyDefaultStream) { gather_all_sees_the_producers(true); }

TEST_F(GpuOrdering, GatherIntoWaitsForTheProducer) {
  const auto memory = poisoned_all();
  std::vector<std::byte> out(kBytes * device_count(), kPoison);
  (void)xfer().gather_into(out);  // warm-up: the pool then holds the staging
  std::fill(out.begin(), out.end(), kPoison);
  slow_produce_all(memory, false);
  ASSERT_TRUE(producers_still_running());
  const auto pieces = xfer().gather_into(out);
  EXPECT_TRUE(gathered_every_device(pieces, out, kBytes, "gather_into after a slow producer"));
}

// A broadcast writes the buffer: it must land after the producer's write, not under it.
TEST_F(GpuOrdering, BroadcastWaitsForTheProducerBeforeWriting) {
  const auto memory = poisoned_all();
  const auto data = pattern_bytes(kBytes - 1, other_seed(0));
  xfer().broadcast(data);  // warm-up: the pool then holds the staging
  slow_produce_all(memory, false);
  ASSERT_TRUE(producers_still_running());
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
  DeviceMemory& mem = poisoned(0);
  const auto data = pattern_bytes(kBytes / 2 + 3, other_seed(0));
  xfer().copy_buffer(0, 0, data);  // warm-up: the pool then holds the staging
  slow_produce(0, mem, seed(0), true);
  ASSERT_TRUE(producers_still_running());
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

// Each destination in turn, behind producers queued afresh: every gather starts inside their window.
TEST_F(MultiGpuOrdering, GatherHandleWaitsForTheProducers) {
  const auto memory = poisoned_all();
  for (std::size_t dst = 0; dst < device_count(); ++dst) (void)xfer().gather(dst).get();  // warm-up
  for (std::size_t dst = 0; dst < device_count(); ++dst) {
    slow_produce_all(memory, false);
    ASSERT_TRUE(producers_still_running()) << "before the gather to " << dst;
    auto out = xfer().gather(dst).get();
    ASSERT_EQ(out.size(), device_count() - 1);
    for (std::size_t j = 0; j < out.size(); ++j) {
      const std::size_t src = j < dst ? j : j + 1;
      EXPECT_TRUE(host_matches(out[j].span(), seed(src), 0,
                               "gather to " + std::to_string(dst) + ", device " + std::to_string(src)));
      // The block goes back to the pool: the next gather must not find these bytes there already.
      std::fill(out[j].span().begin(), out[j].span().end(), kPoison);
    }
  }
}

TEST_F(MultiGpuOrdering, DeviceCopyWaitsForBothProducers) {
  for (const CopyPath path : {CopyPath::automatic, CopyPath::peer, CopyPath::staged}) {
    if (path == CopyPath::peer && !manager().peer_enabled(0, 1)) continue;
    DeviceMemory& src = poisoned(0);
    DeviceMemory& dst = poisoned(1);
    xfer().copy_device_buffer(0, 1, path);  // warm-up: the staged path's pool blocks, the path's set-up
    poison_device(src.ordinal(), src.get(), src.size());
    poison_device(dst.ordinal(), dst.get(), dst.size());
    slow_produce(1, dst, seed(1), false, true);  // the copy must also not be overwritten by dst's producer
    slow_produce(0, src, seed(0), false, true);
    ASSERT_TRUE(producers_still_running()) << path_name(path);
    xfer().copy_device_buffer(0, 1, path);
    sync_producers();
    EXPECT_TRUE(device_matches(dst.ordinal(), dst.get(), kBytes, seed(0), 0,
                               path_name(path) + " copy 0 -> 1 over slow producers"));
  }
}

TEST_F(MultiGpuOrdering, BroadcastFromDeviceWaitsForTheProducers) {
  for (const DeviceBroadcastPath path : {DeviceBroadcastPath::automatic, DeviceBroadcastPath::peer}) {
    const auto memory = poisoned_all();
    xfer().broadcast_from_device(1, path);  // warm-up: the first one creates the NCCL communicator
    slow_produce_all(memory, false);
    ASSERT_TRUE(producers_still_running()) << path_name(path);
    xfer().broadcast_from_device(1, path);
    sync_producers();
    for (std::size_t i = 0; i < memory.size(); ++i) {
      EXPECT_TRUE(device_matches(
          memory[i]->ordinal(), memory[i]->get(), kBytes, seed(1), 0,
          path_name(path) + " broadcast from 1 over slow producers, device " + std::to_string(i)));
    }
  }
}

}  // namespace
}  // namespace gpuxfer::test
