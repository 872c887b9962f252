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

StagingRing::StagingRing(PinnedPool& pool, std::size_t total, std::size_t chunk, std::size_t slots, int node,
                         int owner, std::size_t pending_at_most)
    : chunk_(std::max<std::size_t>(1, std::min(chunk, total))),
      total_(total),
      chunks_((total + chunk_ - 1) / chunk_),
      owner_(owner) {
  if (chunks_ == 0) return;
  const std::size_t least = std::min(min_slots, chunks_);
  std::size_t count = std::max(least, std::min(slots, chunks_));
  if (pending_at_most != 0) {
    PoolState::of(pool).wait_until_fewer_pending(count * chunk_, node, owner_, pending_at_most);
  }
  for (;;) {
    try {
      block_ = pool.acquire(count * chunk_, node);
      break;
    } catch (const Error& e) {
      if (e.code() != Errc::out_of_memory || count == least) throw;
      count = std::max(least, count / 2);
    }
  }
  slot_count_ = count;
  slots_ = std::make_unique<StagingSlot[]>(count);
  for (std::size_t i = 0; i < count; ++i) slots_[i].data = block_.data() + i * chunk_;
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

std::size_t StagingRing::size(std::size_t k) const noexcept { return std::min(chunk_, total_ - k * chunk_); }

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
