// One rank's side of --ranks: its Communicator, its stream and buffers (sized once for the largest size),
// the barrier before every sample, the exchange that makes every rank's sample the job's, and the data
// helpers (patterns per rank and size, poison, checks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <type_traits>
#include <vector>

#include <gpuxfer/communicator.hpp>

#include "../host_threads.hpp"
#include "../options.hpp"
#include "../resources.hpp"
#include "../timing.hpp"
#include "rank_plan.hpp"

namespace gpuxfer::bench {

/// What one sample of a cross-process operation does on one rank: prepare(verify) readies the buffers
/// (with verify, the once-per-size sample: sources filled, destinations poisoned; it waits for its own
/// work), work() is the blocking call that is timed, check() counts this rank's wrong bytes after the
/// verified sample.
struct RankCase {
  std::function<void(bool verify)> prepare;
  std::function<void()> work;
  std::function<std::size_t()> check;
};

class RankBench {
 public:
  /// Allocates this rank's buffers for the largest size of @p options (the root's pinned host data too).
  RankBench(BenchOptions options, Communicator& comm);

  [[nodiscard]] const BenchOptions& options() const noexcept { return options_; }
  [[nodiscard]] Communicator& comm() noexcept { return comm_; }
  [[nodiscard]] int rank() const noexcept { return comm_.rank(); }
  [[nodiscard]] std::size_t world() const noexcept { return static_cast<std::size_t>(comm_.world_size()); }
  [[nodiscard]] bool root() const noexcept { return rank() == 0; }
  [[nodiscard]] HostThreads& threads() noexcept { return threads_; }

  /// This rank's source (largest size) and destination (world() x largest size), device memory.
  [[nodiscard]] std::byte* src() const noexcept { return src_.get(); }
  [[nodiscard]] std::byte* dst() const noexcept { return dst_.get(); }
  /// Pinned host memory of the largest size on the root (the host broadcast's data); empty elsewhere.
  [[nodiscard]] std::span<std::byte> host_data() const noexcept { return host_.span(); }

  /// The pattern of @p rank's data at @p size; rank world() stands for host data, which no rank shares.
  [[nodiscard]] static std::uint64_t seed(std::size_t size, std::size_t rank) noexcept;

  /// Queues the pattern of @p seed into @p bytes at @p ptr (this rank's device) on the bench stream.
  void fill(void* ptr, std::size_t bytes, std::uint64_t seed);
  /// Queues the poison byte into @p bytes at @p ptr on the bench stream.
  void poison(void* ptr, std::size_t bytes);
  /// Waits for the bench stream.
  void synchronize();
  /// Bytes at device pointer @p ptr that differ from the pattern. Blocks.
  [[nodiscard]] std::size_t check_device(const void* ptr, std::size_t bytes, std::uint64_t seed);
  /// Bytes of host @p data that differ from the pattern (on the host workers).
  [[nodiscard]] std::size_t check_host(std::span<const std::byte> data, std::uint64_t seed);

  /// Returns once every rank has called it (an all-gather of a word, its completion spun on).
  void barrier();
  /// Every rank's @p mine, in rank order (collective, blocking). @p T must be trivially copyable and fit
  /// the exchange buffer (exchange_bytes).
  template <class T>
  [[nodiscard]] std::vector<T> all_gather_value(const T& mine);

  /// Measures @p c at one size: the verified sample, the warm-up, then the timed samples, every one after
  /// a barrier and combined over the ranks (combine_samples). Collective; the result is the job's on
  /// every rank. @throws what the case or the communicator throws
  [[nodiscard]] Stats measure(const RankCase& c);

  /// The largest value all_gather_value takes.
  static constexpr std::size_t exchange_bytes = 256;

 private:
  // Every rank's exchange_bytes at @p mine, concatenated in rank order.
  [[nodiscard]] std::vector<std::byte> all_gather_bytes(std::span<const std::byte> mine);
  [[nodiscard]] Sample sample(const RankCase& c, bool verify);

  BenchOptions options_;
  Communicator& comm_;
  Stream stream_;
  DeviceMemory src_;
  DeviceMemory dst_;
  DeviceMemory exchange_;  // world() x exchange_bytes for the values, then world() words for the barrier
  PinnedMemory host_;
  HostThreads threads_;
  std::uint64_t next_run_ = 1;
};

template <class T>
std::vector<T> RankBench::all_gather_value(const T& mine) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= exchange_bytes);
  const std::vector<std::byte> all = all_gather_bytes(std::as_bytes(std::span<const T, 1>(&mine, 1)));
  std::vector<T> out(world());
  for (std::size_t r = 0; r < out.size(); ++r)
    std::memcpy(&out[r], all.data() + r * exchange_bytes, sizeof(T));
  return out;
}

/// Every rank's place (its host, device, bus id and device name), exchanged. Collective.
[[nodiscard]] std::vector<RankPlace> exchange_places(RankBench& bench);

}  // namespace gpuxfer::bench
