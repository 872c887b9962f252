#include "rank_bench.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include <unistd.h>

#include <gpuxfer/testing/pattern.hpp>

namespace gpuxfer::bench {
namespace {

// The host workers that fill and check the root's host buffers, as the single-process bench has.
constexpr std::size_t host_workers = 16;
// How long the barrier spins on its all-gather before the communicator's own bounded wait takes over:
// spinning keeps the ranks' exits from the barrier close together; the bounded wait names a dead rank.
constexpr std::chrono::milliseconds barrier_spin{100};

// A fixed-size record of a rank's place, as all_gather_value carries it.
struct PlaceRecord {
  int device = 0;
  char host[96] = {};
  char pci_bus_id[32] = {};
  char name[96] = {};
};

template <std::size_t N>
void copy_text(char (&to)[N], const std::string& from) {
  from.copy(to, N - 1);
}

}  // namespace

RankBench::RankBench(BenchOptions options, Communicator& comm)
    : options_(std::move(options)),
      comm_(comm),
      stream_(comm.device()),
      src_(comm.device(), options_.sizes.back()),
      dst_(comm.device(), world() * options_.sizes.back()),
      exchange_(comm.device(), world() * (exchange_bytes + sizeof(std::uint64_t))),
      host_(root() ? options_.sizes.back() : 0),
      threads_(std::max<std::size_t>(host_workers, std::thread::hardware_concurrency())) {}

std::uint64_t RankBench::seed(std::size_t size, std::size_t rank) noexcept {
  return pattern::seed_for(size, rank);
}

void RankBench::fill(void* ptr, std::size_t bytes, std::uint64_t seed) {
  const DeviceGuard guard(comm_.device());
  pattern::fill_device(ptr, bytes, seed, 0, stream_.get());
}

void RankBench::poison(void* ptr, std::size_t bytes) {
  const DeviceGuard guard(comm_.device());
  cuda_check(cudaMemsetAsync(ptr, poison_byte, bytes, stream_.get()), "poisoning a destination");
}

void RankBench::synchronize() { stream_.synchronize(); }

std::size_t RankBench::check_device(const void* ptr, std::size_t bytes, std::uint64_t seed) {
  const DeviceGuard guard(comm_.device());
  return pattern::count_mismatches_device(ptr, bytes, seed, 0, stream_.get());
}

std::size_t RankBench::check_host(std::span<const std::byte> data, std::uint64_t seed) {
  return parallel_mismatches(threads_, data, seed);
}

void RankBench::barrier() {
  std::byte* words = exchange_.get() + world() * exchange_bytes;
  const std::size_t word = sizeof(std::uint64_t);
  comm_.all_gather_async(words + static_cast<std::size_t>(rank()) * word, word, words, world() * word,
                         stream_.get());
  const auto until = std::chrono::steady_clock::now() + barrier_spin;
  for (;;) {
    const cudaError_t status = cudaStreamQuery(stream_.get());
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) cuda_check(status, "the barrier's all-gather");
    if (std::chrono::steady_clock::now() > until) {
      comm_.synchronize(stream_.get());  // bounded; names a rank that is gone
      return;
    }
  }
}

std::vector<std::byte> RankBench::all_gather_bytes(std::span<const std::byte> mine) {
  std::byte* slots = exchange_.get();
  std::byte* own = slots + static_cast<std::size_t>(rank()) * exchange_bytes;
  const DeviceGuard guard(comm_.device());
  cuda_check(cudaMemcpy(own, mine.data(), std::min(mine.size(), exchange_bytes), cudaMemcpyHostToDevice),
             "the exchange's value");
  comm_.all_gather(own, exchange_bytes, slots, world() * exchange_bytes);
  std::vector<std::byte> all(world() * exchange_bytes);
  cuda_check(cudaMemcpy(all.data(), slots, all.size(), cudaMemcpyDeviceToHost), "the exchange's values");
  return all;
}

Sample RankBench::sample(const RankCase& c, bool verify) {
  c.prepare(verify);
  barrier();
  Sample mine;
  mine.seconds = host_seconds(c.work);
  if (verify) mine.wrong = c.check();
  const std::vector<Sample> all = all_gather_value(mine);
  return combine_samples(all);
}

Stats RankBench::measure(const RankCase& c) {
  const Sample verified = sample(c, true);
  const SampleFn timed = [&](std::uint64_t) { return std::optional<Sample>(sample(c, false)); };
  Stats stats = bench::measure(timed, options_.warmup, options_.iters, next_run_).value();
  stats.wrong += verified.wrong;
  return stats;
}

std::vector<RankPlace> exchange_places(RankBench& bench) {
  PlaceRecord mine;
  mine.device = bench.comm().device();
  char host[sizeof mine.host] = {};
  static_cast<void>(gethostname(host, sizeof host - 1));
  copy_text(mine.host, host);
  cuda_check(cudaDeviceGetPCIBusId(mine.pci_bus_id, sizeof mine.pci_bus_id, mine.device),
             "cudaDeviceGetPCIBusId");
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, mine.device), "cudaGetDeviceProperties");
  copy_text(mine.name, prop.name);
  std::vector<RankPlace> places;
  for (const PlaceRecord& r : bench.all_gather_value(mine)) {
    places.push_back({static_cast<int>(places.size()), r.device, r.host, r.pci_bus_id, r.name});
  }
  return places;
}

}  // namespace gpuxfer::bench
