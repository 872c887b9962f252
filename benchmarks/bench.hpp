// What every measurement shares: the manager and transfer engine under test, the bench's own streams,
// the buffers (sized once for the largest size), the host workers, the gated timer and the data helpers
// (per-device, per-sample patterns; poison; checks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <gpuxfer/inter_gpu_transfer.hpp>
#include <gpuxfer/multi_gpu_manager.hpp>

#include "host_threads.hpp"
#include "options.hpp"
#include "resources.hpp"
#include "timing.hpp"

namespace gpuxfer::bench {

/// What one verified sample does, in three steps: prepare(run) writes the sources and poisons the
/// destinations (untimed; it waits for its own work), work() is the timed part, check(run) counts the
/// bytes that came out wrong. Every operation and ceiling of the bench is one of these.
struct Case {
  std::function<void(std::uint64_t run)> prepare;
  std::function<void()> work;
  std::function<std::size_t(std::uint64_t run)> check;
  /// Empty: work() blocks until it is done, timed by steady_clock around it. Otherwise work() only
  /// queues on the bench streams of these devices, timed by events behind the spin gate (GatedTimer).
  std::vector<std::size_t> gated{};
  /// At least this many timed samples (latency probes want more than the run's --iters).
  int min_iters = 0;
  /// Run untimed after prepare() and just before each timed work(): the same work into scratch memory,
  /// for a short operation whose one call after the preparation's host work would otherwise be timed
  /// with an idle GPU and CPU waking up (gpuxfer-probe-small-calls: 112.8 us back to back, 211.3 us after
  /// a 5 ms pause, for gather_slices). Empty: none.
  std::function<void()> warm{};
};

class Bench {
 public:
  /// Allocates the buffers for the largest size in @p options on every device of @p manager.
  Bench(BenchOptions options, std::shared_ptr<MultiGpuManager> manager);

  [[nodiscard]] const BenchOptions& options() const noexcept { return options_; }
  [[nodiscard]] MultiGpuManager& manager() const noexcept { return *manager_; }
  [[nodiscard]] InterGpuTransfer& xfer() noexcept { return xfer_; }
  /// Number of devices under test.
  [[nodiscard]] std::size_t devices() const noexcept { return streams_.size(); }
  /// Every device index, 0..devices()-1.
  [[nodiscard]] std::vector<std::size_t> all_devices() const;
  [[nodiscard]] int ordinal(std::size_t device) const { return streams_[device].ordinal(); }
  /// The bench's own stream on @p device (never one of gpuxfer's).
  [[nodiscard]] cudaStream_t stream(std::size_t device) const noexcept { return streams_[device].get(); }
  [[nodiscard]] GatedTimer& timer() noexcept { return timer_; }
  [[nodiscard]] HostThreads& threads() noexcept { return threads_; }
  /// An event without timing on @p device, for the latency probes.
  [[nodiscard]] cudaEvent_t done_event(std::size_t device) const noexcept { return done_[device].get(); }
  /// Communicators over every device, created on first use. @throws Error(Errc::nccl_error)
  [[nodiscard]] const NcclComms& nccl();

  /// Per device: the source buffer (filled with the pattern) and a destination buffer, largest size each.
  [[nodiscard]] std::byte* src(std::size_t device) const noexcept { return src_[device].get(); }
  [[nodiscard]] std::byte* dst(std::size_t device) const noexcept { return dst_[device].get(); }
  /// Device 0's buffer of devices() x largest size, the target of the gathers into device memory.
  [[nodiscard]] std::byte* gathered() const noexcept { return gathered_.get(); }
  /// Pinned host memory of devices() x largest size: raw D2H target, raw H2D source, memcpy target.
  [[nodiscard]] std::span<std::byte> host_pinned() const noexcept { return host_pinned_.span(); }
  /// Pageable host memory of devices() x largest size, touched once so no page faults land in a timing.
  [[nodiscard]] std::span<std::byte> host_pageable() noexcept { return host_pageable_; }
  /// Pinned host memory of the largest size: the source of the pinned broadcasts.
  [[nodiscard]] std::span<std::byte> bcast_pinned() const noexcept { return bcast_pinned_.span(); }

  /// Runs @p c with the options' warm-up and samples (at least c.min_iters of them).
  [[nodiscard]] std::optional<Stats> measure(const Case& c);
  /// Runs @p c interleaved with @p baseline (bench::measure_interleaved): the options' warm-up, then
  /// @p rounds rounds of @p per_round pairs.
  [[nodiscard]] std::optional<Stats> measure_interleaved(const Case& baseline, const Case& c, int rounds,
                                                         int per_round);

  /// The pattern seed of @p device in run @p run (pattern::seed_for); device index devices() gives the
  /// seed of host sources (broadcasts), which no device shares.
  [[nodiscard]] static std::uint64_t seed(std::uint64_t run, std::size_t device) noexcept;

  /// Fills bytes [0, size) of src(d) with seed(run, d) for every d in @p devices and waits for it.
  void fill_sources(std::uint64_t run, std::size_t size, const std::vector<std::size_t>& devices);
  /// Fills @p bytes at device pointer @p ptr of @p device with seed @p seed, queued on the bench stream.
  void fill_device(std::size_t device, void* ptr, std::size_t bytes, std::uint64_t seed);
  /// Poisons @p bytes at device pointer @p ptr of @p device (queued on the bench stream).
  void poison_device(std::size_t device, void* ptr, std::size_t bytes);
  /// Waits for every bench stream.
  void synchronize();
  /// Waits for done_event(d) of every device in @p devices, which the caller recorded after the work it
  /// queued on the bench streams: how a caller waits for its copies (the latency probes time this).
  void wait_done(const std::vector<std::size_t>& devices);
  /// Bytes at device pointer @p ptr of @p device that differ from the pattern. Blocks.
  [[nodiscard]] std::size_t check_device(std::size_t device, const void* ptr, std::size_t bytes,
                                         std::uint64_t seed, std::uint64_t offset = 0);
  /// Bytes of @p data that differ from the pattern (on the host workers).
  [[nodiscard]] std::size_t check_host(std::span<const std::byte> data, std::uint64_t seed,
                                       std::uint64_t offset = 0);
  /// Registers bytes [0, size) at @p ptr as @p device's buffer, produced on the bench stream.
  void register_buffer(std::size_t device, std::byte* ptr, std::size_t size);

 private:
  // One sample of @p c, which must outlive it: prepare, the timed work, check.
  [[nodiscard]] SampleFn sample_of(const Case& c);

  BenchOptions options_;
  std::shared_ptr<MultiGpuManager> manager_;
  InterGpuTransfer xfer_;
  std::vector<Stream> streams_;
  std::vector<Event> done_;
  std::vector<DeviceMemory> src_;
  std::vector<DeviceMemory> dst_;
  DeviceMemory gathered_;
  PinnedMemory host_pinned_;
  PinnedMemory bcast_pinned_;
  std::vector<std::byte> host_pageable_;
  HostThreads threads_;
  GatedTimer timer_;
  std::unique_ptr<NcclComms> nccl_;
  std::uint64_t next_run_ = 1;
};

}  // namespace gpuxfer::bench
