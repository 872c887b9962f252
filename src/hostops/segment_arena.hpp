// The shared segments a Communicator's host operations reuse from call to call, so that no call pays for
// making, mapping and page-locking one (cudaHostRegister of 256 MiB costs milliseconds): on the root, an
// arena of segments it created, each registered once and handed out whole to one call at a time (and to
// gather_to_host's results, HostBuffers that view it); on the other ranks of its node, the mappings of
// whole segments they opened, each registered once and kept for the calls that name it again.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "hostops/shared_segment.hpp"
#include "runtime/deferred_release.hpp"
#include "runtime/event.hpp"

namespace gpuxfer::detail {

/// A shared segment page-locked in this process (cudaHostRegister, portable) for as long as it lives.
/// The destructor unregisters it under its device (DeviceGuard, nothrow), unmaps it and, for the creator,
/// unlinks it; it never throws. Whoever destroys it makes sure no copy into or out of it is still queued.
class RegisteredSegment {
 public:
  /// Registers all of @p segment (nothing for an empty one); @p where names it in messages.
  /// @throws Error(Errc::cuda_error / out_of_memory) when cudaHostRegister fails
  RegisteredSegment(SharedSegment segment, int device, const std::string& where);
  ~RegisteredSegment();
  RegisteredSegment(const RegisteredSegment&) = delete;
  RegisteredSegment& operator=(const RegisteredSegment&) = delete;

  [[nodiscard]] std::byte* data() const noexcept { return segment_.data(); }
  [[nodiscard]] std::size_t size() const noexcept { return segment_.size(); }
  [[nodiscard]] const std::string& name() const noexcept { return segment_.name(); }

 private:
  SharedSegment segment_;
  int device_ = -1;
  bool registered_ = false;
};

/// One segment of the root's arena, held by shared_ptr: by the arena, by the call that writes it and by
/// gather_to_host's results (which may outlive the communicator: the last holder releases it).
struct ArenaEntry {
  ArenaEntry(std::uint64_t id, SharedSegment segment, int device, const std::string& where)
      : id(id), segment(std::move(segment), device, where) {}
  /// Waits on the host for `after` first: the memory is unregistered only once no copy uses it. The wait
  /// is bounded although it takes no timeout: the arena holds every entry while its communicator lives and
  /// releases only free ones, so the last holder is the arena's clear() or a result outliving it, both
  /// after ~CommunicatorState waited for the last operation within the timeout or aborted the
  /// communicator, which ends the NCCL work queued before `after`.
  ~ArenaEntry();
  ArenaEntry(const ArenaEntry&) = delete;
  ArenaEntry& operator=(const ArenaEntry&) = delete;
  std::uint64_t id;           ///< the last part of its name, sent to the other ranks in the first exchanges
  RegisteredSegment segment;  ///< created by this process, linked while cached
  std::uint64_t last_used = 0;
  /// A stream-ordered call's copies into or out of it (or a failed call's) may be queued until this
  /// completes: the arena hands it out again only then.
  SharedEvent after;
};

/// What the arena knows of an entry when a call asks for one.
struct ArenaSlot {
  std::size_t capacity = 0;
  bool free = false;  ///< held by nobody but the arena, and no failed call's copy still queued on it
  std::uint64_t last_used = 0;
};

struct ArenaChoice {
  std::optional<std::size_t> reuse;  ///< the slot the call takes; none: a new entry
  std::vector<std::size_t> evict;    ///< free slots to release, least recently used first
};

/// The arena's choice for a call of @p bytes: the smallest free slot with room for them (of equal ones,
/// the least recently used), else a new entry; and the free slots (never the one reused) to release so
/// that no more than @p cached entries remain, the new one counted, least recently used first. Busy slots
/// are never released, so more than @p cached may remain while results hold them.
[[nodiscard]] ArenaChoice choose_segment(std::span<const ArenaSlot> slots, std::size_t bytes,
                                         std::size_t cached);

/// Of a rank's mappings (@p slots: free = no copy through it may still be queued), the one to release to
/// make room for a new one when @p cached are kept: the least recently used free one; none while fewer
/// than @p cached are kept, or when every one is busy (the new one is then kept beside them).
[[nodiscard]] std::optional<std::size_t> choose_mapping_to_release(std::span<const ArenaSlot> slots,
                                                                   std::size_t cached);

/// The root's segments (gather_to_host's results, broadcast_from_host's bytes), in one process.
class SegmentArena {
 public:
  static constexpr std::size_t cached = 3;

  /// An entry of at least @p bytes that nobody else holds, reused or made (named shared_segment_name(@p pid,
  /// @p nonce, id) with a random id, SharedSegment::create_at_random_name, its capacity @p bytes rounded up
  /// to pages, created and registered), releasing free entries beyond `cached` on a thread of the arena's
  /// (cudaHostUnregister waits for the device's work: a stream-ordered call must not; a new entry that finds
  /// no room waits for them first, at most @p wait, the communicator's timeout: the device's work may never
  /// end). @p where names the call in messages.
  /// @throws Error(Errc::out_of_memory) when /dev/shm or page-locking has no room; Error(Errc::comm_error /
  ///         cuda_error) for another failure to make the segment
  [[nodiscard]] std::shared_ptr<ArenaEntry> acquire(std::size_t bytes, std::uint64_t pid, std::uint64_t nonce,
                                                    int device, const std::string& where,
                                                    std::chrono::milliseconds wait);
  /// As acquire, among the entries made before only (none made, none released): null when no free one
  /// holds @p bytes. Never throws but std::bad_alloc.
  [[nodiscard]] std::shared_ptr<ArenaEntry> acquire_existing(std::size_t bytes);

  /// Releases the arena's hold on every entry; the ones results still hold live on in them.
  void clear() noexcept { entries_.clear(); }
  [[nodiscard]] bool empty() const noexcept { return entries_.empty(); }

 private:
  /// What choose_segment knows of each entry.
  [[nodiscard]] std::vector<ArenaSlot> slots() const;

  DeferredRelease released_;  ///< first, so that it drains after the entries go
  std::vector<std::shared_ptr<ArenaEntry>> entries_;
  std::uint64_t clock_ = 0;
};

/// Lets go of @p entry once @p stream is past the work queued on it so far (after a failure a copy into
/// or out of the entry may still be queued): the arena reuses the entry only then. Never throws.
void release_after_stream(std::shared_ptr<ArenaEntry>& entry, int device, cudaStream_t stream) noexcept;

/// A rank of the root's node: its mappings of whole segments, the `cached` most recently used that no
/// queued copy still uses (a busy one is never released: more are kept meanwhile). A mapping let go of is
/// unregistered on a thread of its own, as the arena's entries.
class SegmentMappings {
 public:
  static constexpr std::size_t cached = 3;

  struct Mapping {
    std::unique_ptr<RegisteredSegment> segment;
    std::uint64_t last_used = 0;
    /// The end of the last copy queued through it (a stream-ordered call's, or a failed one's): it is
    /// released only once this completes.
    SharedEvent after;
  };

  /// The mapping of the whole segment @p name, mapped and registered on its first use and kept for later
  /// calls, making room first as choose_mapping_to_release says (one that finds no room waits for the
  /// mappings let go of, at most @p wait). @p where names the call in messages.
  /// @throws Error(Errc::comm_error) when the segment is missing; Error(Errc::cuda_error / out_of_memory)
  ///         for a failed mapping or registration
  [[nodiscard]] Mapping& get(const std::string& name, int device, const std::string& where,
                             std::chrono::milliseconds wait);

  /// Releases every mapping, first waiting on the host for the copies still queued through them (bounded
  /// as ~ArenaEntry says: called only by ~CommunicatorState, after its bounded wait or abort). Never throws.
  void clear() noexcept;
  [[nodiscard]] bool empty() const noexcept { return mappings_.empty(); }

 private:
  DeferredRelease released_;  ///< first, so that it drains after the mappings go
  std::vector<Mapping> mappings_;
  std::uint64_t clock_ = 0;
};

}  // namespace gpuxfer::detail
