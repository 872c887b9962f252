// The shared state behind PinnedPool and its HostBuffer leases.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <gpuxfer/host_buffer.hpp>
#include <gpuxfer/pinned_pool.hpp>

#include "runtime/event.hpp"

namespace gpuxfer::detail {

struct PoolState {
  explicit PoolState(std::size_t limit_bytes) : limit(limit_bytes) {}
  ~PoolState();
  PoolState(const PoolState&) = delete;
  PoolState& operator=(const PoolState&) = delete;

  /// The block size a request of @p bytes is served with: at most 1/8 more, 4 KiB granules at least.
  [[nodiscard]] static std::size_t size_class(std::size_t bytes) noexcept;

  /// A leased block on NUMA node @p node (-1: wherever cudaHostAlloc puts it): a cached one of
  /// between @p block_bytes (size_class(bytes)) and twice that, else a new one of block_bytes. No lock is
  /// held while CUDA allocates, frees or waits, so one thread's allocation stalls no other lease.
  struct Lease {
    std::byte* block;
    std::size_t block_bytes;
  };
  /// @throws Error(Errc::out_of_memory)
  Lease lease(std::size_t block_bytes, std::size_t bytes, int node);
  /// Back to the cache at once.
  void give_back(std::byte* block, std::size_t block_bytes, int node) noexcept;
  /// Back to the cache once every event of @p after has completed (at once when it holds none).
  void give_back_after(std::byte* block, std::size_t block_bytes, int node,
                       std::vector<SharedEvent> after) noexcept;
  /// Waits, without the lock, until fewer than @p most blocks of @p node and of the size class of
  /// @p bytes are pending: what keeps callers that give blocks back behind GPU work (stream-ordered
  /// uploads) from pinning ever more memory while the GPU is behind.
  void wait_until_fewer_pending(std::size_t bytes, int node, std::size_t most) noexcept;
  void trim() noexcept;
  [[nodiscard]] PoolStats stats() noexcept;

  /// Gives @p buffer back to its pool once @p after has completed (GPU work may still touch it); a view
  /// lets go of its owner after waiting for @p after.
  static void release_after(HostBuffer&& buffer, SharedEvent after) noexcept;
  /// The same once every event of @p after has completed.
  static void release_after(HostBuffer&& buffer, std::vector<SharedEvent> after) noexcept;

  /// Where idle blocks are found: the NUMA node (-1 for cudaHostAlloc's) and the block size.
  using Key = std::pair<int, std::size_t>;

  struct Pending {
    std::byte* block;
    Key key;
    std::vector<SharedEvent> after;  ///< what has yet to complete; the block is idle once it is empty
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
  PoolStats counters;

 private:
  void sweep_locked() noexcept;
  /// Takes idle blocks out of the cache, largest first, until in use + cached + pending is at most
  /// @p target_total; the caller releases them once the lock is let go.
  std::vector<std::pair<Key, std::byte*>> take_idle_locked(std::size_t target_total);
  void release_all(const std::vector<std::pair<Key, std::byte*>>& blocks) const noexcept;
  [[nodiscard]] std::size_t total_locked() const noexcept {
    return counters.in_use + counters.cached + counters.pending;
  }
};

inline void release_after(HostBuffer&& buffer, SharedEvent after) noexcept {
  PoolState::release_after(std::move(buffer), std::move(after));
}

inline void release_after(HostBuffer&& buffer, std::vector<SharedEvent> after) noexcept {
  PoolState::release_after(std::move(buffer), std::move(after));
}

}  // namespace gpuxfer::detail
