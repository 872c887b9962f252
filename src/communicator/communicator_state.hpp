// What a Communicator holds: its place in the job, its device, the NCCL communicator, a stream of its own
// for the blocking forms and the size exchange, the order of its operations, and what the host operations
// keep between calls (among them the shared segments they reuse).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include <gpuxfer/pinned_pool.hpp>

#include "communicator/nccl_comm.hpp"
#include "hostops/host_gather_plan.hpp"
#include "hostops/segment_arena.hpp"
#include "memory/host_copy_workers.hpp"
#include "runtime/event.hpp"
#include "runtime/stream.hpp"

namespace gpuxfer::detail {

/// cudaFree / cudaFreeHost under the memory's device; never throws.
struct DeviceFree {
  int device = -1;
  void operator()(void* ptr) const noexcept;
};
struct PinnedFree {
  void operator()(void* ptr) const noexcept;
};

struct CommunicatorState {
  int rank = 0;
  int world_size = 1;
  int device = 0;
  std::chrono::milliseconds timeout{};
  std::string where;  ///< "rank 1 of 2 (device 1)", for messages
  NcclComm comm;
  Stream stream;  ///< the blocking forms' and the size exchange's
  /// gather_to_host's root: the copies down of what NCCL brought from other nodes, piece by piece beside
  /// NCCL's receives on `stream` (made on first use).
  Stream down;
  // The exchanges of a few words: exchange_words a rank, on the device (NCCL needs device memory) and in
  // pinned memory, so that the copies back never make the host wait outside a bounded wait; on the
  // device, two words more after them for the stream-ordered host operations' reduction to the root.
  static constexpr std::size_t exchange_words = 4;
  static constexpr std::size_t reduction_words = 2;  ///< the reduction's send and receive word
  std::unique_ptr<std::uint64_t, DeviceFree> sizes_device;
  std::unique_ptr<std::uint64_t, PinnedFree> sizes_host;
  /// The end of the last operation queued: the next one waits for it, so that the operations of one
  /// communicator run in the order they were called, whatever the callers' streams.
  SharedEvent last;

  /// The bytes of the exchanges' host words (exchange_words a rank), and of their device words, which
  /// end with the reduction's.
  [[nodiscard]] std::size_t exchange_bytes() const noexcept {
    return exchange_words * sizeof(std::uint64_t) * static_cast<std::size_t>(world_size);
  }
  [[nodiscard]] std::size_t device_word_bytes() const noexcept {
    return exchange_bytes() + reduction_words * sizeof(std::uint64_t);
  }
  /// The reduction's words on the device, after every rank's exchange words.
  [[nodiscard]] std::uint64_t* reduction_words_device() const noexcept {
    return sizes_device.get() + exchange_words * static_cast<std::size_t>(world_size);
  }

  // The host operations (gather_to_host, broadcast_from_host): every rank's node record and its node's
  // first rank (exchanged at creation), and, made on the first call that needs them, the pool of pinned host
  // memory, gather_to_host's device staging on the root for other nodes' bytes, the shared segments this rank
  // created as a root (kept for later calls, and alive in gather_to_host's results) and its mappings of other
  // roots' segments.
  std::optional<std::string> node_id;  ///< GPUXFER_NODE_ID, read at creation
  std::vector<NodeRecord> nodes;
  std::vector<int> node_leaders;
  std::unique_ptr<PinnedPool> pool;
  std::unique_ptr<HostCopyWorkers> host_copy;  ///< the root's copies of its host bytes, split over threads
  std::unique_ptr<std::byte, DeviceFree> staging;
  std::size_t staging_bytes = 0;
  /// The segment size of the last gather_to_host this rank was the root of: the next one sets aside a free
  /// segment of the arena that large before the sizes are known, and offers it in the first exchange.
  std::size_t last_gather_segment = 0;
  SegmentArena arena;
  SegmentMappings mappings;

  CommunicatorState() = default;
  /// Waits for the last operation (bounded: the communicator is aborted past the timeout), then for the
  /// state's streams (after a failure a copy into a segment may still be queued on them), at most the
  /// timeout. False when they still have work then: work of the caller's that they wait for, which may
  /// never end. The state must then not be destroyed: its memory would be freed under copies that may
  /// still run, and cudaFree and cudaHostUnregister would wait for that work. Never throws.
  [[nodiscard]] bool settle() noexcept;
  /// Lets go of the segments (the arena's entries that no result holds, and the mappings) and the rest.
  /// Waits for the device only where settle() said the streams are done (see release).
  ~CommunicatorState();
  CommunicatorState(const CommunicatorState&) = delete;
  CommunicatorState& operator=(const CommunicatorState&) = delete;
};

/// Destroys @p state once it settled (CommunicatorState::settle); else aborts its communicator and leaves it
/// allocated (logged), so that the release is bounded by the timeouts whatever the caller's work does.
/// What Communicator's destructor and move assignment do. Never throws.
void release(std::unique_ptr<CommunicatorState>& state) noexcept;

}  // namespace gpuxfer::detail
