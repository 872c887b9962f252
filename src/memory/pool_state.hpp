// The shared state behind PinnedPool and its HostBuffer leases.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <gpuxfer/host_buffer.hpp>
#include <gpuxfer/pinned_pool.hpp>

#include "runtime/deferred_release.hpp"
#include "runtime/event.hpp"

namespace gpuxfer::detail {

struct PoolState {
  explicit PoolState(std::size_t limit_bytes) : limit(limit_bytes) {}
  /// Unpins the blocks a lease lets go of to stay under the limit, off the leasing thread: cudaFreeHost
  /// waits for the work queued on every stream of the device. First, so that it drains after the rest.
  DeferredRelease unpinning;
  ~PoolState();
  PoolState(const PoolState&) = delete;
  PoolState& operator=(const PoolState&) = delete;

  /// The block size a request of @p bytes is served with: at most 1/8 more, 4 KiB granules at least.
  [[nodiscard]] static std::size_t size_class(std::size_t bytes) noexcept;

  /// A leased block on NUMA node @p node (-1: wherever cudaHostAlloc puts it): a cached one of
  /// between @p block_bytes (size_class(bytes)) and twice that, else a new one of block_bytes. No lock is
  /// held while CUDA allocates, frees or waits, so one thread's allocation stalls no other lease. Cached
  /// blocks let go of to stay under the limit are unpinned on `unpinning`'s thread (pinned memory may
  /// pass the limit until then); a new block that finds no room waits for them first.
  struct Lease {
    std::byte* block;
    std::size_t block_bytes;
  };
  /// @throws Error(Errc::out_of_memory)
  Lease lease(std::size_t block_bytes, std::size_t bytes, int node);
  /// Back to the cache at once.
  void give_back(std::byte* block, std::size_t block_bytes, int node) noexcept;
  /// Back to the cache once every event of @p after has completed (at once when it holds none);
  /// @p owner (-1: none) tags the pending block for wait_until_fewer_pending.
  void give_back_after(std::byte* block, std::size_t block_bytes, int node, std::vector<SharedEvent> after,
                       int owner = -1) noexcept;
  /// Waits, without the lock, until fewer than @p most blocks of @p owner that a lease of @p bytes on
  /// @p node could be served with are pending: what keeps a device's stream-ordered uploads, which give
  /// their rings back behind the GPU's copies, from pinning ever more memory while its upload stream is
  /// behind. Returns early when CUDA cannot say (an event wait refused during another thread's capture).
  void wait_until_fewer_pending(std::size_t bytes, int node, int owner, std::size_t most) noexcept;
  void trim() noexcept;
  [[nodiscard]] PoolStats stats() noexcept;

  /// Gives @p buffer back to its pool once @p after has completed (GPU work may still touch it); a view
  /// lets go of its owner after waiting for @p after.
  static void release_after(HostBuffer&& buffer, SharedEvent after) noexcept;
  /// The same once every event of @p after has completed, the pending block tagged @p owner (-1: none).
  static void release_after(HostBuffer&& buffer, std::vector<SharedEvent> after, int owner = -1) noexcept;

  /// Where idle blocks are found: the NUMA node (-1 for cudaHostAlloc's) and the block size.
  using Key = std::pair<int, std::size_t>;

  struct Pending {
    std::byte* block;
    Key key;
    std::vector<SharedEvent> after;  ///< what has yet to complete; the block is idle once it is empty
    int owner = -1;                  ///< who left it here, for wait_until_fewer_pending; -1: nobody counts it
    std::uint64_t order = 0;         ///< when it was left here (the list itself is unordered)
  };

  /// The pool's state (the library sets device on its manager's pool).
  [[nodiscard]] static PoolState& of(PinnedPool& pool) noexcept;

  /// The CUDA ordinal whose primary context pins and unpins blocks on a thread that has no current
  /// context (HostContextGuard): the manager's first device, so that no other device gets a context;
  /// -1 for a pool of no manager (a device whose primary context exists already). Set before any lease.
  int device = -1;
  std::mutex mutex;
  std::size_t limit;
  std::multimap<Key, std::byte*> idle;
  std::vector<Pending> pending;
  std::uint64_t pending_order = 0;  ///< Pending::order of the next block left pending
  PoolStats counters;

 private:
  void sweep_locked() noexcept;
  /// Takes idle blocks out of the cache, largest first, until in use + cached + pending is at most
  /// @p target_total; the caller releases them once the lock is let go.
  std::vector<std::pair<Key, std::byte*>> take_idle_locked(std::size_t target_total);
  void release_all(const std::vector<std::pair<Key, std::byte*>>& blocks) const noexcept;
  /// As release_all, on `unpinning`'s thread (here when that cannot take them).
  void release_later(std::vector<std::pair<Key, std::byte*>> blocks) noexcept;
  [[nodiscard]] std::size_t total_locked() const noexcept {
    return counters.in_use + counters.cached + counters.pending;
  }
};

/// Whether the GPU no longer touches memory behind an event whose query or wait gave @p status: false
/// while it runs (not ready) and while CUDA refuses to tell because a stream captures (an event recorded
/// inside a capture; another thread's global-mode capture refuses none of gpuxfer's queries, made relaxed);
/// true once it completed and on any error that ends the device's work.
[[nodiscard]] bool gpu_done_with(cudaError_t status) noexcept;

/// Waits on the host for @p event; when CUDA will not wait (gpu_done_with is false) adds it to @p busy,
/// for the memory behind it to be given back with release_after, or without memory for that keeps
/// trying until CUDA does. What a ring's end runs for each of its last events.
void wait_or_keep(const SharedEvent& event, std::vector<SharedEvent>& busy) noexcept;

inline void release_after(HostBuffer&& buffer, SharedEvent after) noexcept {
  PoolState::release_after(std::move(buffer), std::move(after));
}

inline void release_after(HostBuffer&& buffer, std::vector<SharedEvent> after, int owner = -1) noexcept {
  PoolState::release_after(std::move(buffer), std::move(after), owner);
}

}  // namespace gpuxfer::detail
