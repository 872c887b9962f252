// The pipeline of the staged device copy: a transfer cut into chunks that pass through a small ring of
// pooled pinned slots, D2H into a slot and H2D out of it, all ordered on the GPU, so that one chunk's copy
// in overlaps another's copy out. (The pageable paths, where host threads fill and drain the slots, are
// host_pipeline.hpp's.)
#pragma once

#include <cstddef>
#include <vector>

#include <cuda_runtime_api.h>

#include <gpuxfer/host_buffer.hpp>
#include <gpuxfer/options.hpp>
#include <gpuxfer/pinned_pool.hpp>

#include "engine/operation_state.hpp"
#include "runtime/event.hpp"

namespace gpuxfer::detail {

/// Slots of a ring: chunk k+1 moves in while chunk k moves out and chunk k+2's slot waits for its last
/// reader.
inline constexpr std::size_t gpu_ring_slots = 3;
static_assert(gpu_ring_slots <= Options::min_pool_chunks, "Options::validate must refuse a pool too small for a ring");

/// One chunk of a pipelined transfer: bytes [offset, offset + size) of the whole, staged at @p slot.
struct Chunk {
  std::size_t offset = 0;
  std::size_t size = 0;
  std::byte* slot = nullptr;
};

class ChunkRing {
 public:
  /// A ring for @p total bytes in chunks of @p chunk_bytes (fewer slots than @p slots when there are
  /// fewer chunks), its slots on NUMA node @p node (-1: cudaHostAlloc's). An empty transfer leases nothing.
  /// @throws Error(Errc::out_of_memory) when the pool cannot lease the slots (nothing is then held)
  ChunkRing(PinnedPool& pool, std::size_t total, std::size_t chunk_bytes, std::size_t slots, int node);
  /// Waits on the host for the GPU work recorded on the slots (unless they were handed to an
  /// OperationState), then gives them back: the pool never hands out a slot a copy still touches (one
  /// whose events CUDA would not wait for goes back pending behind them).
  ~ChunkRing();
  ChunkRing(const ChunkRing&) = delete;
  ChunkRing& operator=(const ChunkRing&) = delete;

  [[nodiscard]] std::size_t chunk_count() const noexcept { return chunks_; }
  [[nodiscard]] std::size_t slot_count() const noexcept { return slots_.size(); }
  /// Chunk @p k and the slot it is staged in.
  [[nodiscard]] Chunk chunk(std::size_t k) noexcept;

  /// The GPU work on chunk @p k's slot ends with @p done.
  void record(std::size_t k, SharedEvent done);
  /// Makes @p stream wait, on the GPU, for the work recorded on chunk @p k's slot since the last wait.
  void gpu_wait(std::size_t k, cudaStream_t stream);
  /// Hands the slots to @p op, which keeps them from the pool until @p last has completed.
  void release_to(OperationState& op, const SharedEvent& last);

 private:
  std::size_t chunk_bytes_;
  std::size_t total_;
  std::size_t chunks_;
  std::vector<HostBuffer> slots_;
  std::vector<std::vector<SharedEvent>> users_;  // per slot: the work recorded since its last wait
};

}  // namespace gpuxfer::detail
