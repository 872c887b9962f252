// Issue 10 (e): an operation that fails half-way, after some of its copies are queued, must not hand
// memory back while those copies can still write it: neither the caller's output nor pooled pinned
// staging. The failure is real input: the pinned pool runs out when a later device's staging is leased
// (peer access off, so a second source is staged). The first source's copy is held behind a slow producer
// (a kernel that spins before it writes the source), so that on code that throws at once it is still
// queued when the exception arrives; the test then writes the memory itself and checks, once the device
// is idle, that its own bytes are still there.
//
// Every such failure needs a second device: on one GPU no operation queues work and then leases more
// (each operation's staging is leased before its first copy, or one device's copies are all there is).
#include <functional>
#include <string>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::uint64_t kSpinNs = 300'000'000;  // the slow producer spins this long before writing
constexpr std::size_t kLimit = 4 * kMiB;        // Options::min_pool_chunks chunks of kMiB

// Peer access off (a second device's bytes are staged through the pool), 1 MiB chunks, a 4 MiB pool.
class DrainTest : public MultiGpuTest {
 protected:
  [[nodiscard]] Options options() const override {
    Options opts = MultiGpuTest::options();
    opts.enable_peer_access = false;
    opts.chunk_bytes = kMiB;
    opts.pool_limit_bytes = kLimit;
    return opts;
  }

  // Waits for every device to be idle: whatever the failed operation left queued has landed by then.
  void wait_all_devices() {
    for (std::size_t i = 0; i < device_count(); ++i) {
      const DeviceGuard guard(ordinal(i));
      cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
  }

  void expect_pool_empty(const std::string& what) {
    const PoolStats stats = manager().pinned_pool().stats();
    EXPECT_EQ(stats.in_use, 0u) << what << ": pinned memory still leased";
  }
};

using MultiGpuDrain = DrainTest;

// gather_to_device onto device 0: source 0 is a local copy into out, source 1 is staged and its ring
// does not fit the pool. Blocking and stream-ordered forms alike.
TEST_F(MultiGpuDrain, GatherToDeviceThatRunsOutOfStagingLeavesTheOutputAlone) {
  const std::size_t size0 = 4 * kMiB + 5;
  const std::size_t size1 = 3 * kMiB - 7;  // three ring slots of 1 MiB; the test holds 2 of the 4 MiB
  DeviceMemory& src0 = allocate(0, size0);
  register_pattern(1, size1);
  const Stream producer(ordinal(0));
  xfer().set_device_buffer(0, src0.get(), src0.size(), producer.get());
  DeviceMemory& out = allocate(0, size0 + size1);
  const Stream caller(ordinal(0));
  const Stream mine(ordinal(0));

  const std::vector<std::pair<std::string, std::function<void()>>> forms = {
      {"gather_to_device", [&] { (void)xfer().gather_to_device(0, out.get(), out.size()); }},
      {"gather_to_device_async",
       [&] { (void)xfer().gather_to_device_async(0, out.get(), out.size(), caller.get()); }}};
  std::uint64_t n = 0;
  for (const auto& [name, call] : forms) {
    SCOPED_TRACE(name);
    poison_device(ordinal(0), out.get(), out.size());
    HostBuffer held = manager().pinned_pool().acquire(2 * kMiB);
    {
      const DeviceGuard guard(ordinal(0));
      pattern::fill_device_slow(src0.get(), size0, seed(0) + n, kSpinNs, producer.get());
    }
    EXPECT_TRUE(throws_error(call, Errc::out_of_memory, "pinned pool limit"));
    // The output is the caller's again: write it at once, before the slow producer is done.
    const std::uint64_t own = other_seed(n);
    {
      const DeviceGuard guard(ordinal(0));
      pattern::fill_device(out.get(), out.size(), own, 0, mine.get());
    }
    mine.synchronize();
    producer.synchronize();
    wait_all_devices();
    EXPECT_TRUE(device_matches(ordinal(0), out.get(), out.size(), own, 0,
                               name + "'s output, written by the caller after the failure"));
    held.reset();
    expect_pool_empty(name);
    ++n;
  }
}

// gather_slices into pageable memory: device 0's slices are packed and downloaded into a pooled block,
// then device 1's block does not fit. Device 0's block must not go back to the pool while its download
// is queued: leased again at once and filled, it must keep the test's bytes.
TEST_F(MultiGpuDrain, GatherSlicesThatRunsOutOfStagingGivesBackNoBlockStillWritten) {
  const std::size_t bytes0 = 256 * kKiB;
  const std::size_t bytes1 = 3 * kMiB;
  DeviceMemory& a = allocate(0, bytes0);
  DeviceMemory& b = allocate(1, bytes1);
  fill_device(ordinal(1), b.get(), bytes1, seed(1));
  const DeviceSlice slices[] = {{0, a.get(), bytes0}, {1, b.get(), bytes1}};
  std::vector<std::byte> out(bytes0 + bytes1, kPoison);
  HostBuffer held = manager().pinned_pool().acquire(kMiB);
  {
    // The slices are ordered with the legacy default stream (gather_slices' caller).
    const DeviceGuard guard(ordinal(0));
    pattern::fill_device_slow(a.get(), bytes0, seed(0), kSpinNs, cudaStreamLegacy);
  }
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_slices(slices, out); }, Errc::out_of_memory,
                           "pinned pool limit"));
  HostBuffer again = manager().pinned_pool().acquire(bytes0, manager().device(0).staging_node);
  pattern::fill_host(again.span(), other_seed(0));
  wait_all_devices();
  EXPECT_TRUE(host_matches(again.span(), other_seed(0), 0, "a pool block leased right after the failure"));
  EXPECT_TRUE(host_is_poison(out, "gather_slices' output after the failure"));
  again.reset();
  held.reset();
  expect_pool_empty("gather_slices");
}

}  // namespace
}  // namespace gpuxfer::test
