// The pipeline of gpuxfer's pageable paths: a device's transfer cut into chunks staged in a ring of pinned
// slots, the GPU's copies queued by the calling thread while the host copy workers move chunks between the
// slots and the caller's pageable memory, each worker one whole chunk at a time. Slots pass from the
// queuing thread to the workers and back through two counters per slot, never a lock or a barrier, so
// the link and every copy thread stay busy at once (one chunk per worker plus as many in flight on the GPU).
// Measured on the one-GPU runner: 0.85 x the D2H link for downloads, where a ring of three 8 MiB chunks,
// each split over all workers behind a barrier, gave 0.76 x. The chunks taper where the link waits for
// single workers (ChunkPlan): 256 MiB downloads went from 0.87-0.92 to 0.93-0.96 x, 4 and 16 MiB ones
// from about 0.7 to about 1.1 x (4 rounds each, interleaved, in one process each).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gpuxfer/host_buffer.hpp>
#include <gpuxfer/options.hpp>
#include <gpuxfer/pinned_pool.hpp>

#include "runtime/event.hpp"

namespace gpuxfer::detail {

/// A pageable transfer's chunk: below this the GPU's fixed cost per copy shows (1 MiB chunks ran at 0.6 x
/// the link), above it too few chunks are in flight for the workers.
inline constexpr std::size_t host_chunk_bytes = std::size_t{4} << 20;

/// The chunk of a pageable transfer under @p options: Options::chunk_bytes, at most host_chunk_bytes.
[[nodiscard]] inline std::size_t host_chunk(const Options& options) noexcept {
  return std::min(options.chunk_bytes, host_chunk_bytes);
}

/// Where a pageable transfer's pipeline waits on single workers: a download's last chunks are copied out
/// after the link has delivered them, an upload's first chunks are copied in before the link can start.
enum class Taper { none, at_start, at_end };

/// The smallest chunk of a taper: about 5 us on the link, near the GPU's fixed cost per copy.
inline constexpr std::size_t taper_least = std::size_t{256} << 10;

/// The chunks of one transfer of total() bytes, in order: chunks of largest() bytes, except near the
/// tapered end, where each chunk is at most 1/workers of the bytes on the far side of it (down to
/// taper_least). A worker copies its chunk at about 1/workers of the workers' rate, so it is done about
/// when the link has moved the bytes beyond the chunk: the link waits for one taper_least chunk's copy at
/// that end, not for a whole chunk's (a 4 MiB chunk at one of eight workers' speed is about half a
/// millisecond, a tenth of a 256 MiB download). The chunk that does not fill lies at the untapered end;
/// every chunk but the last starts on a multiple of 64 KiB, and the last also takes the total's bytes
/// past the last such multiple. Without a taper (or for a total of at most two taper_least chunks, or
/// chunks no larger) every chunk is @p chunk bytes but the last.
class ChunkPlan {
 public:
  ChunkPlan(std::size_t total, std::size_t chunk, std::size_t workers = 1, Taper taper = Taper::none);

  [[nodiscard]] std::size_t count() const noexcept { return count_; }
  [[nodiscard]] std::size_t total() const noexcept { return total_; }
  /// The size of the largest chunk (a staging slot's).
  [[nodiscard]] std::size_t largest() const noexcept { return largest_; }
  [[nodiscard]] std::size_t offset(std::size_t k) const noexcept {
    return starts_.empty() ? k * chunk_ : starts_[k];
  }
  [[nodiscard]] std::size_t size(std::size_t k) const noexcept {
    return starts_.empty() ? std::min(chunk_, total_ - k * chunk_) : starts_[k + 1] - starts_[k];
  }

 private:
  std::size_t total_;
  std::size_t chunk_;
  std::size_t largest_;
  std::size_t count_;
  std::vector<std::size_t> starts_;  ///< tapered: count_ + 1 offsets (the last is total_); else empty
};

/// One slot of a StagingRing. Chunk k is staged in slot k % slot_count.
struct StagingSlot {
  std::byte* data = nullptr;
  /// k + 1 once chunk k is in the slot for its consumer: a download's copy queued (and `gpu` recorded
  /// after it), an upload's bytes copied in.
  std::atomic<std::size_t> staged{0};
  /// k + 1 once chunk k no longer needs the slot: a download's bytes copied out, an upload's copies
  /// queued (and `gpu` holds their events).
  std::atomic<std::size_t> released{0};
  /// The GPU work on the chunk now in the slot: a download's copy in, an upload's copies out.
  std::vector<SharedEvent> gpu;
};

/// The pinned slots of one device's pageable transfer, leased from the pool as one block on the device's
/// staging node.
class StagingRing {
 public:
  /// A ring for the chunks of @p plan: @p slots slots of plan.largest() bytes, fewer when there are fewer
  /// chunks or the pool cannot lease that much (halving down to min_slots). A transfer no larger than
  /// those slots is staged whole instead, end to end, a slot per chunk. @p owner (-1: none) tags the
  /// block give_back_after leaves pending in the pool; with @p pending_at_most (not 0) the ring first
  /// waits until fewer than that many blocks of @p owner and of its size are pending, so that rings given
  /// back behind GPU work do not pile up while the GPU is behind.
  /// @throws Error(Errc::out_of_memory) when the pool cannot lease even that (nothing is then held)
  StagingRing(PinnedPool& pool, const ChunkPlan& plan, std::size_t slots, int node, int owner = -1,
              std::size_t pending_at_most = 0);
  /// Waits on the host for the GPU work still recorded on the slots, then gives the block back (unless
  /// give_back_after did); behind the events CUDA would not wait for, if any.
  ~StagingRing();
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  /// Slots a ring takes at least, when it has as many chunks: four keep the link busy while the host
  /// copies out.
  static constexpr std::size_t min_slots = 4;

  [[nodiscard]] std::size_t chunk_count() const noexcept { return plan_.count(); }
  [[nodiscard]] std::size_t slot_count() const noexcept { return slot_count_; }
  [[nodiscard]] std::size_t offset(std::size_t k) const noexcept { return plan_.offset(k); }
  [[nodiscard]] std::size_t size(std::size_t k) const noexcept { return plan_.size(k); }
  [[nodiscard]] StagingSlot& slot(std::size_t k) const noexcept { return slots_[k % slot_count_]; }
  /// Whether chunk @p k's slot is free: it is one of the first slot_count chunks, or the chunk before it
  /// in the slot has been released.
  [[nodiscard]] bool free_for(std::size_t k) const noexcept;

  /// Gives the block back to the pool once every event of @p after has completed, without waiting:
  /// @p after must follow all GPU work on the slots (the events recorded after the last copies), and no
  /// host thread may touch the slots any more.
  void give_back_after(std::vector<SharedEvent> after) noexcept;

 private:
  ChunkPlan plan_;
  std::size_t slot_count_ = 0;
  int owner_;
  HostBuffer block_;
  std::unique_ptr<StagingSlot[]> slots_;
};
static_assert(StagingRing::min_slots <= Options::min_pool_chunks, "Options::validate must refuse a pool too small for a ring");

/// What stops every thread of one pipeline: the first failure, kept to be thrown by the calling thread.
class PipelineStop {
 public:
  /// Stops the pipeline with @p failure, kept unless one came first. Pass std::current_exception() from
  /// the catch block: it must be taken in the binary that caught the exception, since a toolchain that
  /// links parts of libstdc++ statically into libgpuxfer gives the library its own exception state (the
  /// runner's /opt/gcc does). Never throws.
  void fail(std::exception_ptr failure) noexcept;
  /// Stops the pipeline without an error (its caller is leaving).
  void stop() noexcept { stopped_.store(true, std::memory_order_release); }
  [[nodiscard]] bool stopped() const noexcept { return stopped_.load(std::memory_order_acquire); }
  /// The first failure; null if none.
  [[nodiscard]] std::exception_ptr failure();
  /// Throws the first failure, if any.
  void rethrow();

  /// Spins (then yields) until @p done() or the pipeline stops; true when done.
  template <class Done>
  bool wait_until(Done done) const {
    for (unsigned spins = 0;; ++spins) {
      if (done()) return true;
      if (stopped()) return false;
      relax(spins);
    }
  }

 private:
  static void relax(unsigned spins) noexcept;

  std::atomic<bool> stopped_{false};
  std::mutex mutex_;
  std::exception_ptr first_;
};

/// Waits on the host for the GPU work recorded on @p slot (its `gpu` events). A failure stops @p stop,
/// with the error naming @p what, and gives false: the worker that called returns.
[[nodiscard]] bool wait_for_slot(const StagingSlot& slot, PipelineStop& stop, const std::string& what) noexcept;

/// Stops a pipeline when the scope ends, so that its workers return before what they use goes away on
/// an exception. Declare it after the CopyTeam it stops.
class StopOnExit {
 public:
  explicit StopOnExit(PipelineStop& stop) noexcept : stop_(stop) {}
  ~StopOnExit() { stop_.stop(); }
  StopOnExit(const StopOnExit&) = delete;
  StopOnExit& operator=(const StopOnExit&) = delete;

 private:
  PipelineStop& stop_;
};

}  // namespace gpuxfer::detail
