/// @file pinned_pool.hpp
/// @brief The cache of pinned (page-locked) host memory that every staged transfer draws from.
#pragma once

#include <cstddef>
#include <memory>

#include <cuda_runtime_api.h>

namespace gpuxfer {

class HostBuffer;

namespace detail {
struct PoolState;
}

/// Counters of a PinnedPool, all in bytes except the counts.
struct PoolStats {
  std::size_t in_use = 0;        ///< leased out now (HostBuffers alive, staging chunks in flight)
  std::size_t cached = 0;        ///< allocated and idle, ready for reuse
  std::size_t pending = 0;       ///< given back but still waiting for the GPU work that touches it
  std::size_t peak_in_use = 0;   ///< highest in_use seen
  std::size_t limit = 0;         ///< the pool's byte limit (in use + cached + pending)
  std::size_t allocations = 0;   ///< cudaHostAlloc calls made so far
  std::size_t reuses = 0;        ///< leases served from the cache
};

/// Pinned host memory (cudaHostAlloc, portable), cached and reused across calls so that no transfer
/// pays for page-locking after warm-up. Thread-safe, and no lock is held while CUDA allocates, frees or
/// waits: one thread's allocation never stalls another's lease from the cache. New blocks are rounded up
/// to size classes at most 1/8 larger than asked for; a cached block up to twice that serves a request
/// rather than being freed for a new one. A block given back with an event returns to the cache only once
/// that event has completed, so the GPU never touches memory that another lease owns.
class PinnedPool {
 public:
  /// A pool that holds at most @p limit_bytes of pinned memory.
  explicit PinnedPool(std::size_t limit_bytes);
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  /// Leases @p bytes of pinned memory (0 gives an empty buffer). Reuses a cached block when one fits,
  /// frees idle blocks when the limit would be passed, and allocates otherwise. The idle blocks freed are
  /// unpinned on a thread of the pool's, since cudaFreeHost waits for the work queued on every stream of
  /// the device: the lease does not wait for the GPU, and the pinned memory may pass the limit by them
  /// until the GPU is past that work (a new block that finds no room waits for them first).
  /// @throws Error(Errc::out_of_memory) when in-use bytes plus @p bytes exceed the limit or the host is out
  ///         of pinnable memory; Error(Errc::no_device / cuda_error) when CUDA itself is unusable
  [[nodiscard]] HostBuffer acquire(std::size_t bytes);

  /// As acquire(bytes), with every page of the block on host NUMA node @p numa_node (mapped, bound to the
  /// node, then page-locked with cudaHostRegister); -1 is acquire(bytes): cudaHostAlloc, node unchosen.
  /// @throws as acquire; Error(Errc::invalid_argument) for a node the host does not have
  [[nodiscard]] HostBuffer acquire(std::size_t bytes, int numa_node);

  /// Frees every cached block (not leased ones, not pending ones whose GPU work is still running), here:
  /// this waits for the work queued on the device (cudaFreeHost does).
  void trim();

  /// A snapshot of the counters.
  [[nodiscard]] PoolStats stats() const;

 private:
  friend struct detail::PoolState;  // the library's own access (the manager's pool pins under its devices)
  std::shared_ptr<detail::PoolState> state_;
};

}  // namespace gpuxfer
