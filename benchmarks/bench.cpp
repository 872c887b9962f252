#include "bench.hpp"

#include <algorithm>
#include <thread>

#include <gpuxfer/testing/pattern.hpp>

namespace gpuxfer::bench {
namespace {

// The host memcpy ceiling runs with up to 16 threads; the checks use as many as there are cores.
constexpr std::size_t host_workers = 16;

}  // namespace

Bench::Bench(BenchOptions options, std::shared_ptr<MultiGpuManager> manager)
    : options_(std::move(options)),
      manager_(std::move(manager)),
      xfer_(manager_),
      streams_([&] {
        std::vector<Stream> s;
        for (const DeviceInfo& d : manager_->devices()) s.emplace_back(d.ordinal);
        return s;
      }()),
      threads_(std::max<std::size_t>(host_workers, std::thread::hardware_concurrency())),
      timer_(streams_) {
  // The 4 KiB latency probes run whatever the sizes are.
  const std::size_t largest = std::max(options_.sizes.back(), std::size_t{4096});
  const std::size_t n = streams_.size();
  for (std::size_t d = 0; d < n; ++d) {
    done_.emplace_back(ordinal(d), false);
    src_.emplace_back(ordinal(d), largest);
    dst_.emplace_back(ordinal(d), largest);
  }
  gathered_ = DeviceMemory(ordinal(0), n * largest);
  host_pinned_ = PinnedMemory(n * largest);
  bcast_pinned_ = PinnedMemory(largest);
  host_pageable_.assign(n * largest, std::byte{0});
}

std::vector<std::size_t> Bench::all_devices() const {
  std::vector<std::size_t> all(devices());
  for (std::size_t d = 0; d < all.size(); ++d) all[d] = d;
  return all;
}

const NcclComms& Bench::nccl() {
  if (!nccl_) {
    std::vector<int> ordinals;
    for (const Stream& s : streams_) ordinals.push_back(s.ordinal());
    nccl_ = std::make_unique<NcclComms>(ordinals);
  }
  return *nccl_;
}

SampleFn Bench::sample_of(const Case& c) {
  return [this, &c](std::uint64_t run) -> std::optional<Sample> {
    c.prepare(run);
    if (c.warm) c.warm();
    Sample s;
    s.seconds = c.gated.empty() ? host_seconds(c.work) : timer_.time(c.gated, c.work);
    s.wrong = c.check(run);
    return s;
  };
}

std::optional<Stats> Bench::measure(const Case& c) {
  const auto phase = [this](bool timed) { timer_.set_gated(timed); };
  const std::optional<Stats> stats =
      bench::measure(sample_of(c), options_.warmup, std::max(options_.iters, c.min_iters), next_run_, phase);
  timer_.set_gated(true);
  return stats;
}

std::optional<Stats> Bench::measure_interleaved(const Case& baseline, const Case& c, int rounds,
                                                int per_round) {
  const auto phase = [this](bool timed) { timer_.set_gated(timed); };
  const std::optional<Stats> stats = bench::measure_interleaved(
      sample_of(baseline), sample_of(c), options_.warmup, rounds, per_round, next_run_, phase);
  timer_.set_gated(true);
  return stats;
}

std::uint64_t Bench::seed(std::uint64_t run, std::size_t device) noexcept {
  return pattern::seed_for(run, device);
}

void Bench::fill_sources(std::uint64_t run, std::size_t size, const std::vector<std::size_t>& devices) {
  for (const std::size_t d : devices) fill_device(d, src(d), size, seed(run, d));
  synchronize();
}

void Bench::fill_device(std::size_t device, void* ptr, std::size_t bytes, std::uint64_t seed) {
  DeviceGuard guard(ordinal(device));
  pattern::fill_device(ptr, bytes, seed, 0, stream(device));
}

void Bench::poison_device(std::size_t device, void* ptr, std::size_t bytes) {
  DeviceGuard guard(ordinal(device));
  cuda_check(cudaMemsetAsync(ptr, poison_byte, bytes, stream(device)), "poisoning a destination");
}

void Bench::synchronize() {
  for (const Stream& s : streams_) s.synchronize();
}

void Bench::wait_done(const std::vector<std::size_t>& devices) {
  for (const std::size_t d : devices) cuda_check(cudaEventSynchronize(done_event(d)), "cudaEventSynchronize");
}

std::size_t Bench::check_device(std::size_t device, const void* ptr, std::size_t bytes, std::uint64_t seed,
                                std::uint64_t offset) {
  DeviceGuard guard(ordinal(device));
  return pattern::count_mismatches_device(ptr, bytes, seed, offset, stream(device));
}

std::size_t Bench::check_host(std::span<const std::byte> data, std::uint64_t seed, std::uint64_t offset) {
  return parallel_mismatches(threads_, data, seed, offset);
}

void Bench::register_buffer(std::size_t device, std::byte* ptr, std::size_t size) {
  xfer_.set_device_buffer(device, ptr, size, stream(device));
}

}  // namespace gpuxfer::bench
