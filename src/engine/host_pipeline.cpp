#include "engine/host_pipeline.hpp"

#include <algorithm>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <gpuxfer/error.hpp>

#include "memory/pool_state.hpp"
#include "runtime/cuda_check.hpp"

namespace gpuxfer::detail {

namespace {

// Taper chunks are whole multiples of this (the untapered chunk and the total's end aside).
constexpr std::size_t taper_granule = std::size_t{64} << 10;

}  // namespace

ChunkPlan::ChunkPlan(std::size_t total, std::size_t chunk, std::size_t workers, Taper taper)
    : total_(total),
      chunk_(std::max<std::size_t>(1, std::min(chunk, total))),
      largest_(chunk_),
      count_((total + chunk_ - 1) / chunk_) {
  const std::size_t least = taper_least;
  if (taper == Taper::none || chunk_ <= least || total <= 2 * least) return;
  workers = std::max<std::size_t>(1, workers);
  // Whole granules, so that every chunk but the last starts on one; the last takes the bytes past them.
  const std::size_t even = total - total % taper_granule;
  // The taper, from its end inwards: each chunk at most 1/workers of the bytes beyond it.
  std::vector<std::size_t> sizes;
  std::size_t beyond = 0;
  while (beyond < even) {
    const std::size_t share = (beyond / workers + taper_granule - 1) / taper_granule * taper_granule;
    const std::size_t size = std::clamp(share, least, chunk_);
    if (size == chunk_) break;
    sizes.push_back(std::min(size, even - beyond));
    beyond += sizes.back();
  }
  const std::size_t rest = even - beyond;
  std::vector<std::size_t> body(rest / chunk_, chunk_);
  if (rest % chunk_ != 0) {
    // The partial chunk at the untapered end.
    if (taper == Taper::at_end) {
      body.insert(body.begin(), rest % chunk_);
    } else {
      body.push_back(rest % chunk_);
    }
  }
  if (taper == Taper::at_end) {
    std::reverse(sizes.begin(), sizes.end());
    sizes.insert(sizes.begin(), body.begin(), body.end());
  } else {
    sizes.insert(sizes.end(), body.begin(), body.end());
  }
  sizes.back() += total - even;
  count_ = sizes.size();
  largest_ = *std::max_element(sizes.begin(), sizes.end());
  starts_.reserve(count_ + 1);
  starts_.push_back(0);
  for (const std::size_t size : sizes) starts_.push_back(starts_.back() + size);
}

StagingRing::StagingRing(PinnedPool& pool, const ChunkPlan& plan, std::size_t slots, int node, int owner,
                         std::size_t pending_at_most)
    : plan_(plan), owner_(owner) {
  const std::size_t chunks = plan_.count();
  if (chunks == 0) return;
  const std::size_t slot_bytes = plan_.largest();
  const std::size_t least = std::min(min_slots, chunks);
  std::size_t count = std::max(least, std::min(slots, chunks));
  // A transfer that fits in the ring's slots is staged end to end, a slot per chunk (small tapered chunks
  // would otherwise take whole slots, and the ring hold less of it).
  bool whole = plan_.total() <= count * slot_bytes;
  std::size_t bytes = whole ? plan_.total() : count * slot_bytes;
  if (pending_at_most != 0)
    PoolState::of(pool).wait_until_fewer_pending(bytes, node, owner_, pending_at_most);
  for (;;) {
    try {
      block_ = pool.acquire(bytes, node);
      break;
    } catch (const Error& e) {
      if (e.code() != Errc::out_of_memory || (!whole && count == least)) throw;
      if (!whole) count = std::max(least, count / 2);
      whole = false;
      bytes = count * slot_bytes;
    }
  }
  slot_count_ = whole ? chunks : count;
  slots_ = std::make_unique<StagingSlot[]>(slot_count_);
  for (std::size_t i = 0; i < slot_count_; ++i)
    slots_[i].data = block_.data() + (whole ? plan_.offset(i) : i * slot_bytes);
}

StagingRing::~StagingRing() {
  // What CUDA would not wait for (an event recorded inside a capture) the block waits for in the pool.
  std::vector<SharedEvent> busy;
  for (std::size_t i = 0; i < slot_count_; ++i) {
    for (const SharedEvent& e : slots_[i].gpu) wait_or_keep(e, busy);
  }
  if (!busy.empty()) release_after(std::move(block_), std::move(busy), owner_);
}

void StagingRing::give_back_after(std::vector<SharedEvent> after) noexcept {
  release_after(std::move(block_), std::move(after), owner_);
  for (std::size_t i = 0; i < slot_count_; ++i) slots_[i].gpu.clear();
}

bool StagingRing::free_for(std::size_t k) const noexcept {
  return k < slot_count_ || slot(k).released.load(std::memory_order_acquire) == k - slot_count_ + 1;
}

void PipelineStop::fail(std::exception_ptr failure) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (!first_) first_ = std::move(failure);
  }
  stop();
}

std::exception_ptr PipelineStop::failure() {
  std::lock_guard lock(mutex_);
  return first_;
}

void PipelineStop::rethrow() {
  if (std::exception_ptr first = failure()) std::rethrow_exception(first);
}

bool wait_for_slot(const StagingSlot& slot, PipelineStop& stop, const std::string& what) noexcept {
  try {
    for (const SharedEvent& e : slot.gpu) GPUXFER_CUDA_TRY_CTX(e->synchronize(), what);
    return true;
  } catch (...) {
    stop.fail(std::current_exception());
    return false;
  }
}

void PipelineStop::relax(unsigned spins) noexcept {
  // A chunk takes tens of microseconds to arrive: spin briefly, then let other threads run.
  if (spins < 256) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  } else {
    std::this_thread::yield();
  }
}

}  // namespace gpuxfer::detail
