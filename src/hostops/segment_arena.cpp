#include "hostops/segment_arena.hpp"

#include <algorithm>
#include <atomic>
#include <new>
#include <string>
#include <utility>

#include <gpuxfer/detail/device_guard.hpp>
#include <gpuxfer/error.hpp>

#include "runtime/capture_mode.hpp"
#include "runtime/cuda_check.hpp"

namespace gpuxfer::detail {

namespace {

// What @p make makes; when it finds no room (out_of_memory), again once what @p released was handed (the
// segments or mappings let go of, which may still hold /dev/shm and page-locked memory) is gone, waiting
// for that at most @p wait: their unregistering waits for the device's work, which may never end. Past
// it, the first error, saying so.
template <class Make>
auto made_after_releases(DeferredRelease& released, std::chrono::milliseconds wait, Make&& make) {
  try {
    return make();
  } catch (const Error& e) {
    if (e.code() != Errc::out_of_memory) throw;
    if (!released.drain_for(wait)) {
      const std::string waited = std::to_string(wait.count()) + " ms";
      throw Error(e.code(), e.message() +
                                " (what was let go of to make room was still being unregistered after " +
                                waited + ": cudaHostUnregister waits for the device's work)");
    }
  }
  return make();
}

}  // namespace

RegisteredSegment::RegisteredSegment(SharedSegment segment, int device, const std::string& where)
    : segment_(std::move(segment)), device_(device) {
  if (segment_.data() == nullptr) return;
  const DeviceGuard guard(device_);
  const RelaxedCapture relaxed;
  GPUXFER_CUDA_TRY_CTX(cudaHostRegister(segment_.data(), segment_.size(), cudaHostRegisterPortable),
                       where + ": page-locking the shared segment " + segment_.name() + " of " +
                           std::to_string(segment_.size()) + " bytes");
  registered_ = true;
}

RegisteredSegment::~RegisteredSegment() {
  if (registered_) {
    const DeviceGuard guard(device_, std::nothrow);
    const RelaxedCapture relaxed;
    (void)handled(cudaHostUnregister(segment_.data()));
  }
  // segment_ unmaps (and unlinks, for the creator) as it goes.
}

ArenaEntry::~ArenaEntry() {
  if (after) (void)after->synchronize();
}

ArenaChoice choose_segment(std::span<const ArenaSlot> slots, std::size_t bytes, std::size_t cached) {
  ArenaChoice choice;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].free || slots[i].capacity < bytes) continue;
    if (!choice.reuse) {
      choice.reuse = i;
      continue;
    }
    const ArenaSlot& best = slots[*choice.reuse];
    const bool smaller = slots[i].capacity < best.capacity;
    const bool older = slots[i].capacity == best.capacity && slots[i].last_used < best.last_used;
    if (smaller || older) choice.reuse = i;
  }
  std::vector<std::size_t> idle;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].free && i != choice.reuse) idle.push_back(i);
  }
  std::stable_sort(idle.begin(), idle.end(),
                   [&](std::size_t a, std::size_t b) { return slots[a].last_used < slots[b].last_used; });
  std::size_t total = slots.size() + (choice.reuse ? 0 : 1);
  for (const std::size_t i : idle) {
    if (total <= cached) break;
    choice.evict.push_back(i);
    --total;
  }
  return choice;
}

namespace {

// Nobody but the arena holds it, and no failed call's copy is still queued on it.
bool is_free(const std::shared_ptr<ArenaEntry>& entry) noexcept {
  if (entry.use_count() != 1) return false;
  // The last other holder's release (an acq_rel decrement) happens before what follows: its reads of the
  // results come before the next call's copies into them.
  std::atomic_thread_fence(std::memory_order_acquire);
  return !entry->after || entry->after->completed() || entry->after->query() == cudaSuccess;
}

}  // namespace

std::vector<ArenaSlot> SegmentArena::slots() const {
  std::vector<ArenaSlot> slots;
  slots.reserve(entries_.size());
  for (const auto& entry : entries_)
    slots.push_back({entry->segment.size(), is_free(entry), entry->last_used});
  return slots;
}

std::shared_ptr<ArenaEntry> SegmentArena::acquire(std::size_t bytes, std::uint64_t pid, std::uint64_t nonce,
                                                  int device, const std::string& where,
                                                  std::chrono::milliseconds wait) {
  const std::vector<ArenaSlot> slots = this->slots();
  const ArenaChoice choice = choose_segment(slots, bytes, cached);
  std::shared_ptr<ArenaEntry> chosen;
  if (choice.reuse) chosen = entries_[*choice.reuse];
  // Let go of on the arena's thread: unregistering waits for the device's work.
  std::vector<std::size_t> evict = choice.evict;
  std::sort(evict.begin(), evict.end(), std::greater<>());
  for (const std::size_t i : evict) {
    released_.release(std::move(entries_[i]));
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  if (!chosen) {
    const auto make = [&] {
      NamedSegment made = SharedSegment::create_at_random_name(pid, nonce, round_to_pages(bytes));
      return std::make_shared<ArenaEntry>(made.id, std::move(made.segment), device, where);
    };
    chosen = made_after_releases(released_, wait, make);
    entries_.push_back(chosen);
  }
  chosen->after.reset();
  chosen->last_used = ++clock_;
  return chosen;
}

std::shared_ptr<ArenaEntry> SegmentArena::acquire_existing(std::size_t bytes) {
  const std::vector<ArenaSlot> slots = this->slots();
  const ArenaChoice choice = choose_segment(slots, bytes, slots.size() + 1);
  if (!choice.reuse) return nullptr;
  std::shared_ptr<ArenaEntry> chosen = entries_[*choice.reuse];
  chosen->after.reset();
  chosen->last_used = ++clock_;
  return chosen;
}

void release_after_stream(std::shared_ptr<ArenaEntry>& entry, int device, cudaStream_t stream) noexcept {
  if (!entry) return;
  entry->after = record_event_or_wait(device, stream);
  entry.reset();
}

std::optional<std::size_t> choose_mapping_to_release(std::span<const ArenaSlot> slots, std::size_t cached) {
  if (slots.size() < cached) return std::nullopt;
  std::optional<std::size_t> oldest;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].free) continue;
    if (!oldest || slots[i].last_used < slots[*oldest].last_used) oldest = i;
  }
  return oldest;
}

namespace {

// No copy through it may still be queued.
bool is_idle(const SharedEvent& after) noexcept {
  return !after || after->completed() || after->query() == cudaSuccess;
}

}  // namespace

SegmentMappings::Mapping& SegmentMappings::get(const std::string& name, int device, const std::string& where,
                                               std::chrono::milliseconds wait) {
  for (Mapping& mapping : mappings_) {
    if (mapping.segment->name() != name) continue;
    mapping.last_used = ++clock_;
    return mapping;
  }
  std::vector<ArenaSlot> slots;
  slots.reserve(mappings_.size());
  for (const Mapping& mapping : mappings_)
    slots.push_back({mapping.segment->size(), is_idle(mapping.after), mapping.last_used});
  if (const auto release = choose_mapping_to_release(slots, cached)) {
    // Unregistered on the thread of the mappings: that waits for the device's work.
    released_.release(std::shared_ptr<RegisteredSegment>(std::move(mappings_[*release].segment)));
    mappings_.erase(mappings_.begin() + static_cast<std::ptrdiff_t>(*release));
  }
  const auto map = [&] {
    SharedSegment whole;
    try {
      whole = SharedSegment::open(name);
    } catch (const Error& e) {
      throw Error(e.code(), where + ": " + e.message());  // the call, the ranks and the offset too
    }
    return std::make_unique<RegisteredSegment>(std::move(whole), device, where);
  };
  mappings_.push_back({made_after_releases(released_, wait, map), ++clock_, nullptr});
  return mappings_.back();
}

void SegmentMappings::clear() noexcept {
  for (const Mapping& mapping : mappings_) {
    if (mapping.after) (void)mapping.after->synchronize();
  }
  mappings_.clear();
}

}  // namespace gpuxfer::detail
