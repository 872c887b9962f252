// The pageable pipeline (engine/host_pipeline.hpp) at its edges, for gather_into and broadcast from
// pageable memory: chunks far smaller than the transfer (the ring turns hundreds of times), one host copy
// thread, a pool that holds only the least ring, and several threads at once on one manager's workers.
// Every byte is checked, outputs are poisoned first, and the pool is back to 0 in use afterwards.
#include <memory>
#include <stdexcept>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kTail = 4096 + 3;

template <class Base>
class HostPipelineTest : public Base {
 protected:
  // Every device registers bytes + 13 i (+ kTail for the broadcast's bytes left alone); a pageable
  // gather_into and a pageable broadcast of @p bytes follow, each checked byte for byte.
  void gather_and_broadcast(std::size_t bytes, const std::string& what) {
    std::vector<DeviceMemory*> memory;
    std::size_t total = 0;
    for (std::size_t i = 0; i < this->device_count(); ++i) {
      memory.push_back(&this->register_pattern(i, bytes + 13 * i + kTail));
      total += bytes + 13 * i + kTail;
    }
    std::vector<std::byte> out(total + kTail + 1, kPoison);
    const std::span<std::byte> into = std::span(out).subspan(1);  // unaligned on purpose
    const std::vector<GatherPiece> pieces = this->xfer().gather_into(into);
    ASSERT_EQ(pieces.size(), this->device_count()) << what;
    for (const GatherPiece& p : pieces) {
      EXPECT_TRUE(host_matches(into.subspan(p.offset, p.size), this->seed(p.device), 0,
                               what + ": gather_into, device " + std::to_string(p.device)));
    }
    EXPECT_EQ(out[0], kPoison) << what << ": the byte before the output was written";
    EXPECT_TRUE(host_is_poison(into.subspan(total), what + ": bytes past the gather"));

    const std::uint64_t data_seed = this->other_seed(7);
    const std::vector<std::byte> data = pattern_bytes(bytes, data_seed);
    this->xfer().broadcast(data);
    for (std::size_t i = 0; i < memory.size(); ++i) {
      EXPECT_TRUE(device_holds_prefix(*memory[i], bytes, data_seed, this->seed(i),
                                      what + ": broadcast, device " + std::to_string(i)));
    }
    EXPECT_EQ(this->manager().pinned_pool().stats().in_use, 0u) << what << ": staging still leased";
  }
};

void one_thread_tiny_chunks(Options& o) {
  o.chunk_bytes = 4096;
  o.host_threads = 1;
}
void least_pool(Options& o) {
  o.chunk_bytes = kMiB;
  o.pool_limit_bytes = Options::min_pool_chunks * kMiB;
}

using GpuHostPipelineOneThread = WithOptions<HostPipelineTest<GpuTest>, one_thread_tiny_chunks>;
using MultiGpuHostPipelineOneThread = WithOptions<HostPipelineTest<MultiGpuTest>, one_thread_tiny_chunks>;
using GpuHostPipelineLeastPool = WithOptions<HostPipelineTest<GpuTest>, least_pool>;
using GpuHostPipeline = HostPipelineTest<GpuTest>;
using MultiGpuHostPipeline = HostPipelineTest<MultiGpuTest>;

// 4 KiB chunks through one copy thread: about 800 chunks, the ring of 4 slots turning 200 times.
TEST_F(GpuHostPipelineOneThread, ManyTurnsOfTheRing) { gather_and_broadcast(3 * kMiB + 5, "4 KiB chunks, 1 thread"); }
TEST_F(MultiGpuHostPipelineOneThread, ManyTurnsOfTheRingOnEveryDevice) {
  gather_and_broadcast(3 * kMiB + 5, "4 KiB chunks, 1 thread, every device");
}

// A pool of 4 x 1 MiB: every ring falls back to the least it can lease, and still runs.
TEST_F(GpuHostPipelineLeastPool, RunsInTheLeastPool) { gather_and_broadcast(32 * kMiB + 4099, "pool of 4 chunks"); }

// Sizes around the chunk (4 MiB): one chunk (this thread copies), one and a bit, many with a short tail.
TEST_F(GpuHostPipeline, SizesAroundTheChunk) {
  for (const std::size_t bytes : {4 * kMiB - 1, 4 * kMiB, 4 * kMiB + 1, 9 * kMiB + 4097, 100 * kMiB + 3}) {
    gather_and_broadcast(bytes, std::to_string(bytes) + " bytes");
  }
}
TEST_F(MultiGpuHostPipeline, SizesAroundTheChunkOnEveryDevice) {
  for (const std::size_t bytes : {4 * kMiB + 1, 100 * kMiB + 3}) {
    gather_and_broadcast(bytes, std::to_string(bytes) + " bytes, every device");
  }
}

// Three threads share the manager's copy workers: two pageable gathers and a pageable broadcast at once,
// each of its own device buffers, over and over. None may wait for another forever or see its bytes.
TEST_F(GpuHostPipeline, ThreadsShareTheCopyWorkers) {
  constexpr std::size_t kBytes = 24 * kMiB + 11;
  constexpr int kRounds = 4;
  const int device = ordinal(0);
  std::vector<std::unique_ptr<DeviceMemory>> sources;
  std::vector<std::unique_ptr<InterGpuTransfer>> transfers;  // destroyed before the memory they point to
  for (std::uint64_t t = 0; t < 3; ++t) {
    sources.push_back(std::make_unique<DeviceMemory>(device, kBytes));
    fill_device(device, sources.back()->get(), kBytes, other_seed(t));
    transfers.push_back(std::make_unique<InterGpuTransfer>(manager_));
    transfers.back()->set_device_buffer(0, sources.back()->get(), kBytes);
  }
  const std::vector<std::string> errors = run_threads(3, [&](std::size_t t) {
    for (int round = 0; round < kRounds; ++round) {
      const std::string where = "thread " + std::to_string(t) + " round " + std::to_string(round);
      if (t < 2) {
        std::vector<std::byte> out(kBytes, kPoison);
        (void)transfers[t]->gather_into(out);
        if (const std::size_t n = pattern::count_mismatches_host(out, other_seed(t)); n != 0) {
          throw std::runtime_error(where + ": gather_into got " + std::to_string(n) + " bytes wrong");
        }
      } else {
        const std::uint64_t data_seed = other_seed(10 + static_cast<std::uint64_t>(round));
        transfers[t]->broadcast(pattern_bytes(kBytes, data_seed));
        if (!device_matches(device, sources[t]->get(), kBytes, data_seed, 0, where)) {
          throw std::runtime_error(where + ": broadcast left wrong bytes");
        }
      }
    }
  });
  EXPECT_TRUE(errors.empty()) << failures(errors);
  EXPECT_EQ(manager().pinned_pool().stats().in_use, 0u);
}

}  // namespace
}  // namespace gpuxfer::test
