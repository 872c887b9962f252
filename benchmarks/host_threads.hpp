// Worker threads for the bench's host-side work: the timed host memcpy ceiling, and the pattern fills,
// poisoning and checks of host buffers that would otherwise take longer than the transfers they check.
// Started once, so that no timed host copy pays for creating threads.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace gpuxfer::bench {

class HostThreads {
 public:
  /// Starts @p count workers (at least 1).
  explicit HostThreads(std::size_t count);
  /// Stops the workers and joins them.
  ~HostThreads();

  [[nodiscard]] std::size_t size() const noexcept { return workers_.size(); }

  /// Runs fn(0) .. fn(parts - 1), each on its own worker, and returns when all have returned;
  /// @p parts is capped at size(). Rethrows the first exception a part threw.
  void run(std::size_t parts, const std::function<void(std::size_t part)>& fn);

  // The workers hold `this`: neither copied nor moved.
  HostThreads(const HostThreads&) = delete;
  HostThreads& operator=(const HostThreads&) = delete;

 private:
  void work(std::size_t index);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(std::size_t)>* job_ = nullptr;
  std::size_t parts_ = 0;
  std::size_t pending_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> workers_;
};

/// The byte range [begin, end) of part @p part when @p bytes are split in @p parts (64-byte aligned).
struct Range {
  std::size_t begin = 0;
  std::size_t end = 0;
};
[[nodiscard]] Range split(std::size_t bytes, std::size_t parts, std::size_t part) noexcept;

/// memcpy of @p bytes from @p src to @p dst split over @p parts workers: libc's, or with @p streaming the
/// library's own host copy (streaming stores, gpuxfer::detail::copy_streaming).
void parallel_copy(HostThreads& threads, std::size_t parts, bool streaming, std::byte* dst, const std::byte* src,
                   std::size_t bytes);

/// Pattern bytes [offset, offset + out.size()) of @p seed into @p out, on every worker, then @p out's
/// cache lines written back and evicted (a copy timed next finds them in memory, as a cold buffer).
void parallel_fill(HostThreads& threads, std::span<std::byte> out, std::uint64_t seed,
                   std::uint64_t offset = 0);

/// Bytes of @p data that differ from pattern bytes [offset, offset + data.size()) of @p seed.
[[nodiscard]] std::size_t parallel_mismatches(HostThreads& threads, std::span<const std::byte> data,
                                              std::uint64_t seed, std::uint64_t offset = 0);

/// Overwrites @p out with the poison byte, so that bytes a transfer fails to write are caught; its cache
/// lines are then written back and evicted, as parallel_fill's.
void parallel_poison(HostThreads& threads, std::span<std::byte> out);

/// The byte that destinations hold before every sample (device memory is poisoned with it too).
inline constexpr int poison_byte = 0xA5;

}  // namespace gpuxfer::bench
