// NCCL collectives on streams of their own. A group's kernels spin until every device's kernel runs; on
// the d2d streams that peer copies share, a copy waiting for another device's work could queue between
// two devices' launches and close a wait cycle across the devices (two threads: one broadcasting over
// NCCL, one copying between the devices in both directions). First the mechanism, made deterministic
// with a copy held back by a slow producer; then the two threads themselves, under a watchdog.
#include <atomic>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

using MultiGpuNcclStreams = SmallChunks<MultiGpuTest>;

constexpr std::uint64_t kHoldNs = 3'000'000'000;  // how long the slow producer holds the copy back

TEST_F(MultiGpuNcclStreams, BroadcastDoesNotQueueBehindAPeerCopy) {
  if (!manager().nccl_available()) GTEST_SKIP() << "NCCL is " << this->manager().nccl_status();
  if (!manager().peer_enabled(1, 0)) GTEST_SKIP() << "needs peer access between devices 0 and 1";
  constexpr std::size_t kBytes = 2 * kMiB + 3;
  DeviceMemory& root = register_pattern(0, kBytes);
  DeviceMemory& receiver = register_pattern(1, kBytes);
  xfer().broadcast_from_device(0, DeviceBroadcastPath::nccl);  // the communicators, made once
  fill_device(receiver.ordinal(), receiver.get(), kBytes, seed(1));

  // Another engine's copy 1 -> 0, queued on device 1's d2d stream behind a producer that spins.
  const Stream held_dst_stream(ordinal(0));
  InterGpuTransfer held(manager_);
  DeviceMemory& held_src = allocate(1, kBytes);
  DeviceMemory& held_dst = allocate(0, kBytes);
  poison_device(held_dst.ordinal(), held_dst.get(), kBytes);
  const Stream producer(ordinal(1));
  {
    const DeviceGuard guard(ordinal(1));
    pattern::fill_device_slow(held_src.get(), kBytes, other_seed(0), kHoldNs, producer.get());
  }
  held.set_device_buffer(1, held_src.get(), kBytes, producer.get());
  // On a stream of its own: registered on device 0's legacy default stream, as the broadcast's root is,
  // the destination would make that stream wait for the held copy, and the root's broadcast with it.
  held.set_device_buffer(0, held_dst.get(), kBytes, held_dst_stream.get());
  TransferHandle copy = held.copy_device_buffer_async(1, 0, CopyPath::peer);

  const auto start = std::chrono::steady_clock::now();
  xfer().broadcast_from_device(0, DeviceBroadcastPath::nccl);
  const auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const cudaError_t producer_state = cudaStreamQuery(producer.get());
  EXPECT_EQ(producer_state, cudaErrorNotReady)
      << "broadcast_from_device(nccl) took " << took << " s and returned only after the slow producer (held "
      << kHoldNs / 1'000'000
      << " ms) had finished: its NCCL kernel queued behind the copy waiting on device 1";
  if (producer_state != cudaErrorNotReady) static_cast<void>(cudaGetLastError());
  EXPECT_TRUE(device_matches(receiver.ordinal(), receiver.get(), kBytes, seed(0), 0, "broadcast receiver"));
  EXPECT_TRUE(device_matches(root.ordinal(), root.get(), kBytes, seed(0), 0, "broadcast root"));
  copy.wait();
  EXPECT_TRUE(device_matches(held_dst.ordinal(), held_dst.get(), kBytes, other_seed(0), 0, "the held copy"));
}

// Per thread: what it is doing now, for the watchdog's message.
struct Progress {
  std::atomic<int> broadcasts{0};
  std::atomic<int> copy_rounds{0};
  [[nodiscard]] std::string describe() const {
    return "broadcasting thread at iteration " + std::to_string(broadcasts.load()) +
           ", copying thread at round " + std::to_string(copy_rounds.load());
  }
};

// Over NCCL where it is available; else (simulated devices of one GPU) the broadcasts take peer copies,
// which share the d2d streams with the opposite copies.
TEST_F(MultiGpuNcclStreams, BroadcastsAndOppositeCopiesFromTwoThreadsNeitherHangNorCorrupt) {
  const DeviceBroadcastPath broadcast_path =
      manager().nccl_available() ? DeviceBroadcastPath::nccl : DeviceBroadcastPath::peer;
  const std::string broadcast_name = manager().nccl_available() ? "NCCL" : "peer";
  constexpr int kIterations = 300;
  constexpr int kChain = 8;  // async copies per round, alternating direction, each waiting on the last
  constexpr std::size_t kBroadcastBytes = 2 * kMiB + 3;
  constexpr std::size_t kCopyBytes = kMiB + 7;  // two chunks of the staged ring
  const CopyPath peer = manager().peer_enabled(0, 1) ? CopyPath::peer : CopyPath::automatic;

  // Each thread has an engine and buffers of its own; they share the manager's streams and NCCL.
  InterGpuTransfer broadcaster(manager_);
  InterGpuTransfer copier(manager_);
  std::array<DeviceMemory*, 2> bcast{&allocate(0, kBroadcastBytes), &allocate(1, kBroadcastBytes)};
  std::array<DeviceMemory*, 2> copied{&allocate(0, kCopyBytes), &allocate(1, kCopyBytes)};
  for (std::size_t i = 0; i < 2; ++i) {
    broadcaster.set_device_buffer(i, bcast[i]->get(), kBroadcastBytes);
    copier.set_device_buffer(i, copied[i]->get(), kCopyBytes);
  }
  for (DeviceMemory* mem : bcast) fill_device(mem->ordinal(), mem->get(), kBroadcastBytes, other_seed(0));
  broadcaster.broadcast_from_device(0, broadcast_path);  // NCCL's communicators, made once

  Progress progress;
  std::atomic<std::size_t> wrong{0};
  std::mutex mutex;
  std::string first_wrong;
  const auto check = [&](const DeviceMemory& mem, std::size_t bytes, std::uint64_t want,
                         const std::string& what) {
    const auto result = device_matches(mem.ordinal(), mem.get(), bytes, want, 0, what);
    if (result) return;
    ++wrong;
    const std::lock_guard lock(mutex);
    if (first_wrong.empty()) first_wrong = result.message();
  };

  const Watchdog watchdog(std::chrono::seconds(180), broadcast_name + " broadcasts racing opposite device copies",
                          [&] { return progress.describe(); });
  const auto errors = run_threads(2, [&](std::size_t t) {
    for (int i = 0; i < kIterations; ++i) {
      const std::uint64_t s = other_seed(1000 * t + static_cast<std::uint64_t>(i));
      const std::string at = " at " + std::to_string(i);
      if (t == 0) {
        const std::size_t root = static_cast<std::size_t>(i) % 2;
        fill_device(bcast[root]->ordinal(), bcast[root]->get(), kBroadcastBytes, s);
        broadcaster.broadcast_from_device(root, broadcast_path);
        check(*bcast[1 - root], kBroadcastBytes, s, broadcast_name + " broadcast receiver" + at);
        progress.broadcasts = i + 1;
        continue;
      }
      fill_device(copied[0]->ordinal(), copied[0]->get(), kCopyBytes, s);
      poison_device(copied[1]->ordinal(), copied[1]->get(), kCopyBytes);
      std::vector<TransferHandle> chain;
      for (int k = 0; k < kChain; ++k) {
        chain.push_back(k % 2 == 0 ? copier.copy_device_buffer_async(0, 1, peer)
                                   : copier.copy_device_buffer_async(1, 0, peer));
      }
      for (TransferHandle& h : chain) h.wait();
      check(*copied[0], kCopyBytes, s, "device 0 after the peer chain" + at);
      check(*copied[1], kCopyBytes, s, "device 1 after the peer chain" + at);
      poison_device(copied[0]->ordinal(), copied[0]->get(), kCopyBytes);
      copier.copy_device_buffer(1, 0, CopyPath::staged);
      check(*copied[0], kCopyBytes, s, "staged copy 1 -> 0" + at);
      poison_device(copied[1]->ordinal(), copied[1]->get(), kCopyBytes);
      copier.copy_device_buffer(0, 1, CopyPath::staged);
      check(*copied[1], kCopyBytes, s, "staged copy 0 -> 1" + at);
      progress.copy_rounds = i + 1;
    }
  });
  std::string text;
  for (const std::string& e : errors) text += "\n  " + e;
  EXPECT_TRUE(errors.empty()) << text;
  EXPECT_EQ(wrong.load(), 0u) << "checks with wrong bytes; the first: " << first_wrong;
  EXPECT_EQ(manager().pinned_pool().stats().in_use, 0u) << "staging still leased";
}

}  // namespace
}  // namespace gpuxfer::test
