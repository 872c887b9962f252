// The execution model: a registered buffer belongs to its registering stream both ways, gpuxfer's own
// operations are ordered per buffer, the stream-ordered forms fork from and join back to the caller's
// stream, and handles chain into streams. Every race is provoked on purpose: slow producers (a kernel
// that spins before it writes), large copies, writes queued right behind reads.
#include <chrono>
#include <thread>
#include <vector>

#include "gpu/fixture.hpp"

#include "common/expect_error.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kBytes = 64 * kMiB;
constexpr std::uint64_t kSpinNs = 200'000'000;  // a slow producer spins this long before writing

// Keeps @p stream busy for about @p ns (a slow kernel writing a scratch buffer).
void stall(DeviceMemory& scratch, cudaStream_t stream, std::uint64_t ns = kSpinNs) {
  const DeviceGuard guard(scratch.ordinal());
  pattern::fill_device_slow(scratch.get(), scratch.size(), 1, ns, stream);
}

using GpuStreamOrder = GpuTest;

// Issue 10 (seed loop): registered first, written after; the work queued on the registering stream at
// the time of the gather is what the gather waits for (not only what was queued at registration).
TEST_F(GpuStreamOrder, AnOperationWaitsForWorkQueuedOnTheRegisteringStreamAfterRegistration) {
  DeviceMemory& mem = allocate(0, kBytes);
  poison_device(mem.ordinal(), mem.get(), mem.size());
  const Stream producer(mem.ordinal());
  xfer().set_device_buffer(0, mem.get(), mem.size(), producer.get());
  // Once first (of the poison), so that the pool holds the results' block: a first cudaHostAlloc could
  // synchronise the device under the gather, and the block it leaves holds poison.
  (void)xfer().gather_all();
  {
    const DeviceGuard guard(mem.ordinal());
    pattern::fill_device_slow(mem.get(), mem.size(), seed(0), kSpinNs, producer.get());
  }
  ASSERT_TRUE(still_running(mem.ordinal(), producer.get(), "the producer before gather_all"));
  const auto out = xfer().gather_all();
  ASSERT_EQ(out.size(), 1U);
  EXPECT_TRUE(host_matches(out[0].span(), seed(0), 0, "gather_all after the producer's later write"));
}

// The other way: the registering stream's later work waits for gpuxfer's reads of the buffer.
TEST_F(GpuStreamOrder, TheRegisteringStreamWaitsForAStreamOrderedRead) {
  DeviceMemory& mem = allocate(0, kBytes);
  DeviceMemory& scratch = allocate(0, kMiB);
  const Stream producer(mem.ordinal());
  const Stream caller(mem.ordinal());
  {
    const DeviceGuard guard(mem.ordinal());
    pattern::fill_device(mem.get(), mem.size(), seed(0), 0, producer.get());
  }
  xfer().set_device_buffer(0, mem.get(), mem.size(), producer.get());
  PinnedMemory out(kBytes);
  std::fill(out.span().begin(), out.span().end(), kPoison);
  stall(scratch, caller.get());                              // the read starts only after this
  (void)xfer().gather_into_async(out.span(), caller.get());  // reads mem after the stall
  {
    const DeviceGuard guard(mem.ordinal());
    pattern::fill_device(mem.get(), mem.size(), other_seed(0), 0, producer.get());  // must wait for the read
  }
  caller.synchronize();
  producer.synchronize();
  EXPECT_TRUE(host_matches(out.span(), seed(0), 0, "the gathered bytes: the producer's first write"));
  EXPECT_TRUE(
      device_matches(mem.ordinal(), mem.get(), kBytes, other_seed(0), 0, "the producer's second write"));
}

// A stream-ordered form starts after the caller's stream's earlier work and that stream's later work
// sees its result.
TEST_F(GpuStreamOrder, AStreamOrderedGatherForksFromAndJoinsTheCallersStream) {
  DeviceMemory& mem = allocate(0, kBytes);
  poison_device(mem.ordinal(), mem.get(), mem.size());
  xfer().set_device_buffer(0, mem.get(), mem.size());
  const Stream caller(mem.ordinal());
  // The test's own allocations before the slow write: cudaHostAlloc and cudaMalloc may synchronise.
  PinnedMemory out(kBytes);
  std::fill(out.span().begin(), out.span().end(), kPoison);
  DeviceMemory& back = allocate(0, kBytes);
  poison_device(back.ordinal(), back.get(), back.size());
  {
    const DeviceGuard guard(mem.ordinal());
    pattern::fill_device_slow(mem.get(), mem.size(), seed(0), kSpinNs, caller.get());
  }
  (void)xfer().gather_into_async(out.span(), caller.get());
  EXPECT_TRUE(
      still_running(mem.ordinal(), caller.get(), "the caller's stream once gather_into_async returned"));
  {
    const DeviceGuard guard(mem.ordinal());
    cuda_check(cudaMemcpyAsync(back.get(), out.data(), kBytes, cudaMemcpyHostToDevice, caller.get()),
               "copy back");
  }
  caller.synchronize();
  EXPECT_TRUE(host_matches(out.span(), seed(0), 0, "gather_into_async after the caller's slow write"));
  EXPECT_TRUE(
      device_matches(back.ordinal(), back.get(), kBytes, seed(0), 0, "the caller's stream's later copy"));
}

// gpuxfer's own operations: a write (broadcast) queued right behind a read still waiting on its stream.
TEST_F(GpuStreamOrder, ABroadcastWaitsForAGatherStillReadingItsTarget) {
  DeviceMemory& mem = register_pattern(0, kBytes);
  DeviceMemory& scratch = allocate(0, kMiB);
  const Stream caller(mem.ordinal());
  PinnedMemory out(kBytes);
  const auto data = pattern_bytes(kBytes, other_seed(0));  // before the stall: only the calls run inside it
  // The broadcast once first, so that the pool holds its staging (a first cudaHostAlloc could synchronise
  // the device under it); then the buffer holds seed(0)'s bytes again.
  xfer().broadcast(data);
  fill_device(mem.ordinal(), mem.get(), mem.size(), seed(0));
  std::fill(out.span().begin(), out.span().end(), kPoison);
  stall(scratch, caller.get());
  (void)xfer().gather_into_async(out.span(), caller.get());
  ASSERT_TRUE(still_running(mem.ordinal(), caller.get(), "the gather's stream before the broadcast"));
  xfer().broadcast(data);  // writes the buffer the gather has not read yet
  caller.synchronize();
  EXPECT_TRUE(host_matches(out.span(), seed(0), 0, "the gather's bytes: before the broadcast"));
  EXPECT_TRUE(device_matches(mem.ordinal(), mem.get(), kBytes, other_seed(0), 0, "the broadcast's bytes"));
}

// The same, with the buffer's registration cleared and the same memory registered again with another
// stream while the gather still waits to read it: the broadcast waits for that read too (a registration
// cleared hands gpuxfer's work in flight on its memory to the next one of that memory).
TEST_F(GpuStreamOrder, ABroadcastAfterClearingAndRegisteringAgainWaitsForAGatherStillReading) {
  DeviceMemory& mem = register_pattern(0, kBytes);
  DeviceMemory& scratch = allocate(0, kMiB);
  const Stream caller(mem.ordinal());
  const Stream other(mem.ordinal());
  PinnedMemory out(kBytes);
  const auto data = pattern_bytes(kBytes, other_seed(0));
  xfer().broadcast(data);  // the pool holds its staging from here (see above)
  fill_device(mem.ordinal(), mem.get(), mem.size(), seed(0));
  std::fill(out.span().begin(), out.span().end(), kPoison);
  stall(scratch, caller.get());
  (void)xfer().gather_into_async(out.span(), caller.get());
  ASSERT_TRUE(still_running(mem.ordinal(), caller.get(), "the gather's stream before the broadcast"));
  xfer().clear_device_buffer(0);
  xfer().set_device_buffer(0, mem.get(), mem.size(), other.get());
  xfer().broadcast(data);  // writes the buffer the gather has not read yet
  caller.synchronize();
  EXPECT_TRUE(host_matches(out.span(), seed(0), 0, "the gather's bytes: before the broadcast"));
  EXPECT_TRUE(device_matches(mem.ordinal(), mem.get(), kBytes, other_seed(0), 0, "the broadcast's bytes"));
}

// While a pageable gather_into of @p transfer's buffers into @p out, on a thread of its own, waits on the
// host for @p producer, held back about 1.5 s (it holds the buffers' orderings meanwhile): runs @p act
// 200 ms in, and says whether the producer was still running once @p act returned, and the gather did
// not throw.
template <class Act>
::testing::AssertionResult beside_a_pageable_gather(InterGpuTransfer& transfer, std::span<std::byte> out,
                                                    DeviceMemory& scratch, const Stream& producer,
                                                    Act&& act) {
  stall(scratch, producer.get(), 1'500'000'000);
  bool threw = false;
  std::thread gather([&] {
    try {
      (void)transfer.gather_into(out);
    } catch (...) {
      threw = true;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  act();
  ::testing::AssertionResult first = still_running(scratch.ordinal(), producer.get(), "the producer");
  gather.join();
  if (threw) return ::testing::AssertionFailure() << "the pageable gather threw";
  return first;
}

// The same memory registered again while another thread's pageable gather of it waits on the host for
// the producer: set_device_buffer returns at once, the producer still running (review engine F4). It used
// to copy the old ordering under that ordering's lock, with the registry's lock held, so it waited for the
// whole gather and every other thread's operation waited too.
TEST_F(GpuStreamOrder, RegisteringTheSameMemoryAgainDoesNotWaitForAPageableGatherOfIt) {
  DeviceMemory& mem = allocate(0, kBytes);
  DeviceMemory& scratch = allocate(0, kMiB);
  const Stream producer(mem.ordinal());
  const Stream other(mem.ordinal());
  fill_device(mem.ordinal(), mem.get(), mem.size(), seed(0));
  xfer().set_device_buffer(0, mem.get(), mem.size(), producer.get());
  std::vector<std::byte> out(kBytes, kPoison);
  (void)xfer().gather_into(out);  // once first, so that the pool holds the ring's staging
  std::fill(out.begin(), out.end(), kPoison);
  EXPECT_TRUE(beside_a_pageable_gather(xfer(), out, scratch, producer, [&] {
    xfer().set_device_buffer(0, mem.get(), mem.size(), other.get());
  })) << "set_device_buffer waited for the pageable gather";
  EXPECT_TRUE(host_matches(out, seed(0), 0, "the pageable gather's bytes"));
}

// A stream-ordered gather of a buffer that another thread's pageable gather reads too, waiting on the host
// for the producer: reads exclude no reads, so the stream-ordered one returns at once, the producer still
// running, and both see the producer's bytes (review engine F4). The pageable gather holds the buffer's
// ordering while it waits, and it used to hold it alone.
TEST_F(GpuStreamOrder, AStreamOrderedGatherDoesNotWaitForAnotherThreadsPageableGatherOfItsBuffer) {
  DeviceMemory& mem = register_pattern(0, kBytes);
  DeviceMemory& scratch = allocate(0, kMiB);
  const Stream producer(mem.ordinal());
  const Stream caller(mem.ordinal());
  xfer().set_device_buffer(0, mem.get(), mem.size(), producer.get());
  std::vector<std::byte> pageable(kBytes, kPoison);
  PinnedMemory pinned(kBytes);
  (void)xfer().gather_into(pageable);  // once first: the pool holds the ring's staging
  std::fill(pageable.begin(), pageable.end(), kPoison);
  std::fill(pinned.span().begin(), pinned.span().end(), kPoison);
  EXPECT_TRUE(beside_a_pageable_gather(xfer(), pageable, scratch, producer, [&] {
    (void)xfer().gather_into_async(pinned.span(), caller.get());
  })) << "the stream-ordered gather waited for the pageable one";
  caller.synchronize();
  EXPECT_TRUE(host_matches(pageable, seed(0), 0, "the pageable gather's bytes"));
  EXPECT_TRUE(host_matches(pinned.span(), seed(0), 0, "the stream-ordered gather's bytes"));
}

// Issue 10 (c): the blocking gather_to_device orders its output with the legacy default stream. The source
// is registered with an idle stream of its own, so that only the output's order can make the gather wait.
TEST_F(GpuStreamOrder, GatherToDeviceWritesItsOutputAfterTheLegacyStreamsWork) {
  DeviceMemory& src = allocate(0, kBytes);
  fill_device(src.ordinal(), src.get(), src.size(), seed(0));
  const Stream idle(src.ordinal());
  xfer().set_device_buffer(0, src.get(), src.size(), idle.get());
  DeviceMemory& out = allocate(0, kBytes);
  (void)xfer().gather_to_device(0, out.get(), out.size());  // once first: nothing of its set-up in the window
  poison_device(out.ordinal(), out.get(), out.size());
  {
    const DeviceGuard guard(out.ordinal());
    // A slow write of poison-like bytes: the gather must land after it, not under it.
    pattern::fill_device_slow(out.get(), out.size(), other_seed(0), kSpinNs, cudaStreamLegacy);
  }
  ASSERT_TRUE(still_running(out.ordinal(), cudaStreamLegacy, "the legacy stream before gather_to_device"));
  (void)xfer().gather_to_device(0, out.get(), out.size());
  {
    const DeviceGuard guard(out.ordinal());
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  EXPECT_TRUE(device_matches(out.ordinal(), out.get(), kBytes, seed(0), 0, "gather_to_device's output"));
}

// Issue 10 (c): gather_slices reads the slices after the legacy default stream's work.
TEST_F(GpuStreamOrder, GatherSlicesReadsAfterTheLegacyStreamsWork) {
  DeviceMemory& mem = allocate(0, 4 * kMiB);
  poison_device(mem.ordinal(), mem.get(), mem.size());
  std::vector<DeviceSlice> slices;
  for (std::size_t k = 0; k < 64; ++k) slices.push_back({0, mem.get() + k * 64 * kKiB, 4 * kKiB});
  std::vector<std::byte> out(64 * 4 * kKiB, kPoison);
  // Once first, so that the pool holds the staging: a first cudaHostAlloc would synchronise the device.
  ASSERT_EQ(xfer().gather_slices(slices, out), out.size());
  {
    const DeviceGuard guard(mem.ordinal());
    pattern::fill_device_slow(mem.get(), mem.size(), seed(0), kSpinNs, cudaStreamLegacy);
  }
  ASSERT_EQ(xfer().gather_slices(slices, out), out.size());
  for (std::size_t k = 0; k < 64; ++k) {
    ASSERT_TRUE(host_matches(std::span(out).subspan(k * 4 * kKiB, 4 * kKiB), seed(0), k * 64 * kKiB,
                             "slice " + std::to_string(k)));
  }
}

// Handles chain: a stream made to wait for a handle runs its later work only after the transfer.
TEST_F(GpuStreamOrder, AHandleMakesAStreamWait) {
  register_pattern(0, kBytes);
  DeviceMemory& scratch = allocate(0, kMiB);
  const Stream slow(ordinal(0));
  const Stream follower(ordinal(0));
  stall(scratch, slow.get());
  GatherHandle h = xfer().gather_all_async(slow.get());
  h.stream_wait(follower.get());
  const gpuxfer::testing::Event after(ordinal(0), false);
  cuda_check(cudaEventRecord(after.get(), follower.get()), "cudaEventRecord");
  EXPECT_EQ(cudaEventQuery(after.get()), cudaErrorNotReady) << "the follower ran before the gather";
  follower.synchronize();
  EXPECT_TRUE(h.ready());
  const auto out = h.get();
  ASSERT_EQ(out.size(), 1U);
  EXPECT_TRUE(host_matches(out[0].span(), seed(0), 0, "gather_all_async"));
}

// One stream per device: each device's read forks from its own stream, and every stream joins.
TEST_F(GpuStreamOrder, PerDeviceStreamsForkAndJoinPerDevice) {
  std::vector<DeviceMemory*> memory;
  std::vector<std::unique_ptr<Stream>> owned;
  std::vector<cudaStream_t> streams;
  for (std::size_t i = 0; i < device_count(); ++i) {
    memory.push_back(&allocate(i, kBytes));
    poison_device(ordinal(i), memory[i]->get(), kBytes);
    xfer().set_device_buffer(i, memory[i]->get(), kBytes);
    owned.push_back(std::make_unique<Stream>(ordinal(i)));
    streams.push_back(owned.back()->get());
    const DeviceGuard guard(ordinal(i));
    pattern::fill_device_slow(memory[i]->get(), kBytes, seed(i), kSpinNs, streams.back());
  }
  GatherHandle h = xfer().gather_all_async(streams);
  for (const auto& s : owned) s->synchronize();
  EXPECT_TRUE(h.ready()) << "every stream joined the gather";
  const auto out = h.get();
  ASSERT_EQ(out.size(), device_count());
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_TRUE(
        host_matches(out[i].span(), seed(i), 0, "per-device gather_all_async, device " + std::to_string(i)));
  }
  const std::vector<cudaStream_t> too_few(device_count() + 1, streams.front());
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_all_async(too_few); }, Errc::invalid_argument,
                           "streams for " + std::to_string(device_count()) + " devices (one per device)"));
  // No stream at all is a wrong count too, not the form without a caller stream.
  EXPECT_TRUE(throws_error([&] { (void)xfer().gather_all_async(std::span<const cudaStream_t>{}); },
                           Errc::invalid_argument, "0 streams for " + std::to_string(device_count()) + " devices"));
}

// Every stream-ordered form, against its blocking form's bytes.
TEST_F(GpuStreamOrder, EveryStreamOrderedFormMovesTheRightBytes) {
  DeviceMemory& mem = register_pattern(0, 3 * kMiB + 17);
  const Stream caller(ordinal(0));
  PinnedMemory pinned(mem.size());
  std::fill(pinned.span().begin(), pinned.span().end(), kPoison);
  DeviceMemory& dev_out = allocate(0, mem.size());
  poison_device(dev_out.ordinal(), dev_out.get(), dev_out.size());
  GatherHandle handle = xfer().gather_async(0, caller.get());  // skips device 0, the one registered
  (void)xfer().gather_into_async(pinned.span(), caller.get());
  std::vector<std::byte> pageable(mem.size(), kPoison);
  (void)xfer().gather_into_async(pageable, caller.get());
  (void)xfer().gather_to_device_async(0, dev_out.get(), dev_out.size(), caller.get());
  caller.synchronize();
  const std::vector<HostBuffer> skipped = handle.get();
  ASSERT_EQ(skipped.size(), device_count() - 1) << "gather_async(0): one result per other device";
  for (std::size_t j = 0; j < skipped.size(); ++j) {
    EXPECT_TRUE(skipped[j].empty()) << "gather_async(0): device " << j + 1 << " has no buffer, yet "
                                    << skipped[j].size() << " bytes";
  }
  EXPECT_TRUE(host_matches(pinned.span(), seed(0), 0, "gather_into_async, pinned"));
  EXPECT_TRUE(host_matches(pageable, seed(0), 0, "gather_into_async, pageable"));
  EXPECT_TRUE(
      device_matches(dev_out.ordinal(), dev_out.get(), mem.size(), seed(0), 0, "gather_to_device_async"));

  const auto data = pattern_bytes(mem.size(), other_seed(0));
  xfer().broadcast_async(data, caller.get());  // pageable: staged, then ordered
  caller.synchronize();
  EXPECT_TRUE(
      device_matches(mem.ordinal(), mem.get(), mem.size(), other_seed(0), 0, "broadcast_async, pageable"));
  std::copy(data.begin(), data.end(), pinned.data());
  pattern::fill_host(pinned.span(), other_seed(1));
  xfer().copy_buffer_async(0, 0, pinned.span(), caller.get());
  caller.synchronize();
  EXPECT_TRUE(
      device_matches(mem.ordinal(), mem.get(), mem.size(), other_seed(1), 0, "copy_buffer_async, pinned"));
  std::vector<std::byte> slices_out(2 * kKiB, kPoison);
  const std::array<DeviceSlice, 2> slices{{{0, mem.get() + 5, kKiB}, {0, mem.get() + kMiB, kKiB}}};
  ASSERT_EQ(xfer().gather_slices_async(slices, slices_out, caller.get()), 2 * kKiB);
  EXPECT_TRUE(
      host_matches(std::span(slices_out).first(kKiB), other_seed(1), 5, "gather_slices_async, first"));
  EXPECT_TRUE(
      host_matches(std::span(slices_out).last(kKiB), other_seed(1), kMiB, "gather_slices_async, second"));
}

// The staging ring of one pageable upload on this manager: 2 x host_threads slots of host_chunk bytes
// (at least StagingRing::min_slots).
std::size_t staging_ring_bytes(const MultiGpuManager& manager) {
  const Options& options = manager.options();
  return std::max<std::size_t>(4, 2 * std::size_t{options.host_threads}) *
         std::min(options.chunk_bytes, 4 * kMiB);
}

// Leases and returns the ring that uploads of @p bytes use, so that the timed call finds it cached.
void warm_staging(InterGpuTransfer& xfer, std::size_t bytes) {
  const auto warm = pattern_bytes(bytes, 99);
  xfer.broadcast(warm);
}

// A stream-ordered upload from pageable memory that fits the staging ring (four chunks always do) returns
// once its bytes are staged, while the caller's stream is still busy with earlier work: the caller may
// rewrite its memory at once, and the device gets the call's bytes, after that earlier work (which
// writes the same buffer).
TEST_F(GpuStreamOrder, APageableUploadReturnsOnceStagedAndLandsAfterTheStreamsEarlierWork) {
  const std::size_t bytes = 3 * std::min(manager().options().chunk_bytes, 4 * kMiB) + 17;  // 4 chunks
  GPUXFER_SKIP_ABOVE_TEST_MAX(bytes);
  DeviceMemory& mem = register_pattern(0, bytes);
  warm_staging(xfer(), bytes);
  const Stream caller(mem.ordinal());
  for (const bool broadcast : {true, false}) {
    const std::string what = broadcast ? "broadcast_async" : "copy_buffer_async";
    const std::uint64_t data_seed = other_seed(broadcast ? 1 : 2);
    auto data = pattern_bytes(bytes, data_seed);  // before the stall: only the call runs inside it
    {
      const DeviceGuard guard(mem.ordinal());
      pattern::fill_device_slow(mem.get(), bytes, other_seed(7), kSpinNs, caller.get());
    }
    if (broadcast) {
      xfer().broadcast_async(data, caller.get());
    } else {
      xfer().copy_buffer_async(0, 0, data, caller.get());
    }
    EXPECT_EQ(cudaStreamQuery(caller.get()), cudaErrorNotReady)
        << what << " from pageable memory returned only after the stream's earlier work";
    std::fill(data.begin(), data.end(), kPoison);  // staged: the caller's memory is free again
    caller.synchronize();
    EXPECT_TRUE(
        device_matches(mem.ordinal(), mem.get(), bytes, data_seed, 0, what + ", after the slow write"));
  }
  EXPECT_EQ(manager().pinned_pool().stats().in_use, 0U) << "a staging ring is still leased";
  EXPECT_EQ(manager().pinned_pool().stats().pending, 0U)
      << "a staging ring is still pending after the stream";
}

// Larger than the ring: the last chunks wait for slots whose uploads wait for the stream's earlier work,
// so the call returns only then; every byte still lands after that work.
TEST_F(GpuStreamOrder, APageableUploadLargerThanTheRingLandsAfterTheStreamsEarlierWork) {
  const std::size_t bytes = 3 * staging_ring_bytes(manager()) / 2 + 5;
  GPUXFER_SKIP_ABOVE_TEST_MAX(bytes);
  DeviceMemory& mem = register_pattern(0, bytes);
  const Stream caller(mem.ordinal());
  {
    const DeviceGuard guard(mem.ordinal());
    pattern::fill_device_slow(mem.get(), bytes, other_seed(7), kSpinNs, caller.get());
  }
  const auto data = pattern_bytes(bytes, other_seed(3));
  xfer().broadcast_async(data, caller.get());
  caller.synchronize();
  EXPECT_TRUE(
      device_matches(mem.ordinal(), mem.get(), bytes, other_seed(3), 0, "broadcast_async, 1.5 rings"));
}

// Pageable uploads queued faster than their stream runs them: each waits for nothing while fewer than two
// staging rings of its size are still pending behind the device's upload stream, then for one of those,
// so the pinned memory held grows no further however long the queue. Each round's bytes are copied aside
// on the stream right behind its upload: a ring handed out again while its upload was still queued would
// show as a round carrying a later round's bytes.
TEST_F(GpuStreamOrder, PageableUploadsQueuedBehindASlowStreamHoldABoundedAmountOfPinnedMemory) {
  constexpr std::uint64_t rounds = 6;
  const std::size_t bytes = 3 * std::min(manager().options().chunk_bytes, 4 * kMiB) + 17;
  GPUXFER_SKIP_ABOVE_TEST_MAX(bytes);
  DeviceMemory& mem = register_pattern(0, bytes);
  std::vector<DeviceMemory*> seen;
  for (std::uint64_t round = 0; round < rounds; ++round) seen.push_back(&allocate(0, bytes));
  warm_staging(xfer(), bytes);
  const Stream caller(mem.ordinal());
  const DeviceGuard guard(mem.ordinal());
  pattern::fill_device_slow(mem.get(), bytes, other_seed(7), kSpinNs, caller.get());
  std::size_t ring = 0;
  std::size_t most = 0;
  for (std::uint64_t round = 0; round < rounds; ++round) {
    const auto data = pattern_bytes(bytes, other_seed(10 + round));
    xfer().broadcast_async(data, caller.get());
    ASSERT_EQ(cudaMemcpyAsync(seen[round]->get(), mem.get(), bytes, cudaMemcpyDeviceToDevice, caller.get()),
              cudaSuccess);
    const PoolStats stats = manager().pinned_pool().stats();
    if (round == 0) ring = stats.pending;  // the stream is still stalled: the first ring waits behind it
    most = std::max(most, stats.pending + stats.in_use);
  }
  EXPECT_GT(ring, 0U) << "the first upload's ring was not left pending behind the stalled stream";
  EXPECT_LE(most, 2 * ring) << "more than two staging rings held while the stream was behind";
  caller.synchronize();
  for (std::uint64_t round = 0; round < rounds; ++round) {
    EXPECT_TRUE(device_matches(mem.ordinal(), seen[round]->get(), bytes, other_seed(10 + round), 0,
                               "round " + std::to_string(round) + "'s upload"));
  }
}

class MultiGpuStreamOrder : public SmallChunks<GpuTest> {
 protected:
  [[nodiscard]] std::size_t devices_needed() const override { return 2; }

  // Device 0's buffer of kBytes: seed(0)'s pattern written on @p stream, registered with that stream.
  DeviceMemory& register_on(const Stream& stream) {
    DeviceMemory& mem = allocate(0, kBytes);
    {
      const DeviceGuard guard(mem.ordinal());
      pattern::fill_device(mem.get(), mem.size(), seed(0), 0, stream.get());
    }
    xfer().set_device_buffer(0, mem.get(), mem.size(), stream.get());
    return mem;
  }

  // A gather's result for device 0 holds seed(0)'s bytes and device 0's buffer other_seed(0)'s (the write
  // queued behind the read, @p what).
  void expect_read_before(const std::vector<HostBuffer>& out, const DeviceMemory& mem, const char* what) {
    ASSERT_EQ(out.size(), device_count() - 1);
    EXPECT_TRUE(host_matches(out[0].span(), seed(0), 0, "the gather's bytes: before the write"));
    EXPECT_TRUE(device_matches(mem.ordinal(), mem.get(), kBytes, other_seed(0), 0, what));
  }
};

// A gather without a caller stream copies a buffer registered with a stream on that stream itself (no
// event on it, no wait of it): the registering stream's write queued right behind the handle's read lands
// after it.
TEST_F(MultiGpuStreamOrder, TheRegisteringStreamsNextWriteWaitsForAGatherHandlesRead) {
  const Stream producer(ordinal(0));
  DeviceMemory& mem = register_on(producer);
  DeviceMemory& scratch = allocate(0, kMiB);
  stall(scratch, producer.get());  // the read waits behind this
  GatherHandle h = xfer().gather(1);  // device 0's buffer, no caller stream: on the producer's stream
  {
    const DeviceGuard guard(mem.ordinal());
    pattern::fill_device(mem.get(), mem.size(), other_seed(0), 0, producer.get());  // must follow the read
  }
  const auto out = h.get();
  producer.synchronize();
  expect_read_before(out, mem, "the producer's second write");
}

// gpuxfer's own write (a blocking broadcast, on gpuxfer's stream) queued right behind a gather handle's
// read that runs on the stalled registering stream: the broadcast waits for that read.
TEST_F(MultiGpuStreamOrder, ABroadcastWaitsForAGatherReadingOnTheRegisteringStream) {
  const Stream producer(ordinal(0));
  DeviceMemory& mem = register_on(producer);
  DeviceMemory& scratch = allocate(0, kMiB);
  register_pattern(1, kBytes);
  stall(scratch, producer.get());
  GatherHandle h = xfer().gather(1);  // device 0's buffer, on the stalled producer's stream
  const auto data = pattern_bytes(kBytes, other_seed(0));
  xfer().broadcast(data);  // writes the buffer the gather has not read yet
  const auto out = h.get();
  expect_read_before(out, mem, "the broadcast's bytes");
}

// The same memory registered again with another stream while a gather reads it on the first: a
// broadcast then waits for that read too (the read is listed in the buffer's order, which the new
// registration keeps; an event on the new stream would not cover it).
TEST_F(MultiGpuStreamOrder, ABroadcastAfterReRegistrationWaitsForAReadOnTheOldStream) {
  const Stream first(ordinal(0));
  const Stream second(ordinal(0));
  DeviceMemory& mem = register_on(first);
  DeviceMemory& scratch = allocate(0, kMiB);
  register_pattern(1, kBytes);
  stall(scratch, first.get());
  GatherHandle h = xfer().gather(1);  // device 0's buffer, on the stalled first stream
  xfer().set_device_buffer(0, mem.get(), mem.size(), second.get());
  const auto data = pattern_bytes(kBytes, other_seed(0));
  xfer().broadcast(data);
  const auto out = h.get();
  expect_read_before(out, mem, "the broadcast's bytes");
}

// gather_async with one stream per device: the destination's stream, whose device the gather skips,
// waits for the gather too (device 1's read held behind a stall on its own stream), as the header says of
// every stream of the list.
TEST_F(MultiGpuStreamOrder, TheDestinationsStreamOfAPerDeviceListWaitsForTheGather) {
  const Stream s0(ordinal(0));
  const Stream s1(ordinal(1));
  const std::vector<cudaStream_t> streams{s0.get(), s1.get()};
  register_pattern(0, kBytes);
  register_pattern(1, kBytes);
  DeviceMemory& scratch = allocate(1, kMiB);
  static_cast<void>(xfer().gather_async(0, streams).get());  // warm: the results' pinned blocks exist
  s0.synchronize();
  s1.synchronize();
  stall(scratch, s1.get());  // device 1's read starts only after this
  GatherHandle h = xfer().gather_async(0, streams);
  EXPECT_EQ(cudaStreamQuery(s1.get()), cudaErrorNotReady) << "the stall should still run";
  EXPECT_EQ(cudaStreamQuery(s0.get()), cudaErrorNotReady) << "device 0's stream did not wait for the gather";
  s0.synchronize();
  EXPECT_TRUE(h.ready()) << "device 0's stream returned before the gather finished";
  const auto out = h.get();
  ASSERT_EQ(out.size(), device_count() - 1);
  EXPECT_TRUE(host_matches(out[0].span(), seed(1), 0, "device 1's bytes"));
}

// Many blocking 4 KiB gathers in a row on a buffer of a user stream, each after the producer rewrote it
// on that stream without a host wait: each returns that round's bytes (the events seen complete are
// neither waited for nor asked about again, and a reused event starts unknown).
TEST_F(GpuStreamOrder, BackToBackSmallGathersSeeEachRoundsWrite) {
  constexpr std::size_t small = 4096;
  DeviceMemory& mem = allocate(0, small);
  const Stream producer(mem.ordinal());
  xfer().set_device_buffer(0, mem.get(), mem.size(), producer.get());
  for (std::uint64_t round = 0; round < 200; ++round) {
    {
      const DeviceGuard guard(mem.ordinal());
      if (round % 50 == 0) {
        pattern::fill_device_slow(mem.get(), small, seed(round), kSpinNs / 20, producer.get());
      } else {
        pattern::fill_device(mem.get(), small, seed(round), 0, producer.get());
      }
    }
    const auto out = xfer().gather_all();
    ASSERT_EQ(out.size(), 1U);
    ASSERT_TRUE(host_matches(out[0].span(), seed(round), 0, "round " + std::to_string(round)));
  }
}

// Issue 10 (a): a write into device 0 queued behind a staged copy still reading device 0. The copy's read
// waits behind a stall on the registering stream while the upload stages its first chunks on the host and
// queues them: without the order they would land before the read, or under it.
TEST_F(MultiGpuStreamOrder, AnUploadWaitsForAStagedCopyStillReadingItsTarget) {
  const Stream producer(ordinal(0));
  DeviceMemory& src = register_on(producer);
  DeviceMemory& scratch = allocate(0, kMiB);
  DeviceMemory& dst = allocate(1, kBytes);
  xfer().set_device_buffer(1, dst.get(), dst.size());
  const auto other = pattern_bytes(src.size(), other_seed(0));
  // The same two calls once first, so that the pool holds the copy's and the upload's staging at once (a
  // first cudaHostAlloc could synchronise the device under them); then device 0 holds seed(0) again.
  {
    TransferHandle warm = xfer().copy_device_buffer_async(0, 1, CopyPath::staged);
    xfer().copy_buffer(0, 0, other);
    warm.wait();
  }
  {
    const DeviceGuard guard(src.ordinal());
    pattern::fill_device(src.get(), src.size(), seed(0), 0, producer.get());
  }
  producer.synchronize();
  poison_device(dst.ordinal(), dst.get(), dst.size());
  stall(scratch, producer.get());  // the copy's read waits behind this
  TransferHandle h = xfer().copy_device_buffer_async(0, 1, CopyPath::staged);
  ASSERT_TRUE(still_running(src.ordinal(), producer.get(), "the registering stream before the upload"));
  xfer().copy_buffer(0, 0, other);  // must wait for the copy's read
  h.wait();
  EXPECT_TRUE(
      device_matches(dst.ordinal(), dst.get(), dst.size(), seed(0), 0, "device 1: the old bytes of 0"));
  EXPECT_TRUE(
      device_matches(src.ordinal(), src.get(), src.size(), other_seed(0), 0, "device 0: the new bytes"));
}

// The per-thread default stream is one stream per device. A buffer registered on device 1's, gathered
// with cudaStreamPerThread as the caller's stream while device 0 is current: the caller's stream is then
// device 0's per-thread stream, not the registering one, so the gather still waits for the work queued on
// device 1's (a slow producer there). Found by reading: the two handles compared equal.
TEST_F(MultiGpuStreamOrder, APerThreadCallerStreamOfAnotherDeviceWaitsForTheRegisteringOne) {
  register_pattern(0, kBytes);
  DeviceMemory& one = allocate(1, kBytes);
  poison_device(one.ordinal(), one.get(), one.size());
  {
    const DeviceGuard guard(one.ordinal());
    xfer().set_device_buffer(1, one.get(), one.size(), cudaStreamPerThread);
  }
  const DeviceGuard current(ordinal(0));
  // Once first (of the poison), so that the pool holds the results' blocks: a first cudaHostAlloc could
  // synchronise the devices under the gather.
  (void)xfer().gather_all_async(cudaStreamPerThread).get();
  {
    const DeviceGuard guard(one.ordinal());
    pattern::fill_device_slow(one.get(), one.size(), seed(1), kSpinNs, cudaStreamPerThread);
  }
  ASSERT_TRUE(
      still_running(one.ordinal(), cudaStreamPerThread, "device 1's per-thread stream before the gather"));
  GatherHandle h = xfer().gather_all_async(cudaStreamPerThread);
  const auto out = h.get();
  ASSERT_EQ(out.size(), device_count());
  EXPECT_TRUE(host_matches(out[0].span(), seed(0), 0, "device 0's bytes"));
  EXPECT_TRUE(
      host_matches(out[1].span(), seed(1), 0, "device 1's bytes, after its per-thread stream's write"));
}

// Issue 10 (b): a broadcast queued right behind a gather handle that reads one of its targets (device 1's
// buffer, read on its stalled registering stream): the gather gets the old bytes, then every device the
// broadcast's.
TEST_F(MultiGpuStreamOrder, ABroadcastWaitsForAGatherHandleStillReading) {
  const Stream producer(ordinal(1));
  DeviceMemory& zero = register_pattern(0, kBytes);
  DeviceMemory& one = allocate(1, kBytes);
  DeviceMemory& scratch = allocate(1, kMiB);
  poison_device(one.ordinal(), one.get(), one.size());
  xfer().set_device_buffer(1, one.get(), one.size(), producer.get());
  const auto other = pattern_bytes(kBytes, other_seed(0));
  // The same two calls once first (of the poison), so that the pool holds the gather's result and the
  // broadcast's staging at once; then device 1 holds seed(1)'s bytes, device 0 seed(0)'s again.
  {
    GatherHandle warm = xfer().gather(0);
    xfer().broadcast(other);
    (void)warm.get();
  }
  fill_device(zero.ordinal(), zero.get(), zero.size(), seed(0));
  {
    const DeviceGuard guard(one.ordinal());
    pattern::fill_device(one.get(), one.size(), seed(1), 0, producer.get());
  }
  producer.synchronize();
  stall(scratch, producer.get());
  GatherHandle h = xfer().gather(0);  // device 1's buffer, on the stalled producer's stream
  ASSERT_TRUE(still_running(one.ordinal(), producer.get(), "the registering stream before the broadcast"));
  xfer().broadcast(other);  // writes the buffer the gather has not read yet
  const auto out = h.get();
  ASSERT_EQ(out.size(), device_count() - 1);
  EXPECT_TRUE(
      host_matches(out[0].span(), seed(1), 0, "the gather's bytes of device 1: before the broadcast"));
  EXPECT_TRUE(device_matches(zero.ordinal(), zero.get(), kBytes, other_seed(0), 0,
                             "the broadcast's bytes, device 0"));
  EXPECT_TRUE(
      device_matches(one.ordinal(), one.get(), kBytes, other_seed(0), 0, "the broadcast's bytes, device 1"));
}

}  // namespace
}  // namespace gpuxfer::test
