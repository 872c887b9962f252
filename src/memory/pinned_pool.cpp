#include <gpuxfer/detail/device_guard.hpp>
#include <gpuxfer/pinned_pool.hpp>

#include <algorithm>
#include <bit>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <gpuxfer/error.hpp>
#include <gpuxfer/host_buffer.hpp>

#include "memory/numa_memory.hpp"
#include "memory/pool_state.hpp"
#include "runtime/capture_mode.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/log.hpp"

namespace gpuxfer {
namespace detail {

std::size_t PoolState::size_class(std::size_t bytes) noexcept {
  constexpr std::size_t min_granule = 4096;
  const std::size_t granule = std::max(min_granule, std::bit_ceil(bytes) / 8);
  return (bytes + granule - 1) / granule * granule;
}

namespace {

// Pinning and unpinning need a current context but no particular device (the memory is portable): they
// run under HostContextGuard(device) so that a thread without a context gets none and no device outside
// the manager's gets one, and in a primary context even when the caller has a context of its own: the
// block stays in the pool after the call, and a context the caller created would take it along when
// destroyed.
std::byte* allocate(std::size_t bytes, int node, int device) {
  const HostContextGuard context(device, HostContextGuard::PrimaryOnly{});
  const RelaxedCapture relaxed;
  if (node >= 0) return allocate_on_node(bytes, node);
  void* block = nullptr;
  const cudaError_t err = handled(cudaHostAlloc(&block, bytes, cudaHostAllocPortable));
  if (err != cudaSuccess) {
    throw Error(err == cudaErrorMemoryAllocation ? Errc::out_of_memory : errc_for(err),
                "cudaHostAlloc of " + std::to_string(bytes) + " pinned bytes failed: " + describe_cuda_error(err));
  }
  return static_cast<std::byte*>(block);
}

void release(std::byte* block, const PoolState::Key& key, int device) noexcept {
  const HostContextGuard context(device, HostContextGuard::PrimaryOnly{});
  const RelaxedCapture relaxed;
  if (key.first >= 0) {
    free_on_node(block, key.second);
  } else {
    (void)handled(cudaFreeHost(block));
  }
}

}  // namespace

bool gpu_done_with(cudaError_t status) noexcept {
  switch (status) {
    case cudaErrorNotReady:
    // Refused because a stream captures: the queries are made relaxed, so another thread's capture in
    // global mode refuses none, but an event last recorded inside a capture is refused in every mode.
    case cudaErrorCapturedEvent:
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorNotPermitted:
      return false;
    default:  // complete, or an error that ends the device's work (a fault, a context gone)
      return true;
  }
}

void wait_or_keep(const SharedEvent& event, std::vector<SharedEvent>& busy) noexcept {
  if (gpu_done_with(event->synchronize())) return;
  try {
    busy.push_back(event);
  } catch (...) {  // no memory to keep it: wait here until CUDA can
    while (!gpu_done_with(event->synchronize())) std::this_thread::yield();
  }
}

PoolState::~PoolState() {
  for (auto& p : pending) {
    for (const SharedEvent& e : p.after) (void)e->synchronize();
  }
  for (auto& p : pending) release(p.block, p.key, device);
  for (auto& [key, block] : idle) release(block, key, device);
}

void PoolState::sweep_locked() noexcept {
  for (std::size_t i = 0; i < pending.size();) {
    std::vector<SharedEvent>& after = pending[i].after;
    // Not ready, or a query CUDA refused (an event recorded in a capture): the block stays.
    while (!after.empty() && gpu_done_with(after.back()->query())) after.pop_back();
    if (!after.empty()) {
      ++i;
      continue;
    }
    counters.pending -= pending[i].key.second;
    try {
      idle.emplace(pending[i].key, pending[i].block);
      counters.cached += pending[i].key.second;
    } catch (...) {  // no memory for the cache's entry: unpin the block instead, as give_back does
      release(pending[i].block, pending[i].key, device);
    }
    pending[i] = std::move(pending.back());
    pending.pop_back();
  }
}

std::vector<std::pair<PoolState::Key, std::byte*>> PoolState::take_idle_locked(std::size_t target_total) {
  std::vector<std::pair<Key, std::byte*>> taken;
  // Largest blocks first: fewest frees to get under the target.
  while (!idle.empty() && total_locked() > target_total) {
    auto largest = std::max_element(idle.begin(), idle.end(),
                                    [](const auto& a, const auto& b) { return a.first.second < b.first.second; });
    taken.emplace_back(largest->first, largest->second);
    counters.cached -= largest->first.second;
    idle.erase(largest);
  }
  return taken;
}

void PoolState::release_all(const std::vector<std::pair<Key, std::byte*>>& blocks) const noexcept {
  for (const auto& [key, block] : blocks) release(block, key, device);
}

namespace {

// Blocks unpinned when the last holder lets go (DeferredRelease's thread).
struct Unpin {
  std::vector<std::pair<PoolState::Key, std::byte*>> blocks;
  int device;
  ~Unpin() {
    for (const auto& [key, block] : blocks) release(block, key, device);
  }
};

}  // namespace

void PoolState::release_later(std::vector<std::pair<Key, std::byte*>> blocks) noexcept {
  if (blocks.empty()) return;
  std::shared_ptr<Unpin> unpin;
  try {
    unpin.reset(new Unpin{{}, device});
  } catch (...) {  // no memory for it: here, then
    release_all(blocks);
    return;
  }
  unpin->blocks = std::move(blocks);
  unpinning.release(std::move(unpin));
}

PoolState::Lease PoolState::lease(std::size_t block_bytes, std::size_t bytes, int node) {
  std::unique_lock lock(mutex);
  sweep_locked();
  // The smallest cached block of this node that holds the request and wastes at most as much again.
  const auto reuse = [&]() -> std::optional<Lease> {
    auto it = idle.lower_bound(Key{node, block_bytes});
    if (it == idle.end() || it->first.first != node || it->first.second / 2 > block_bytes) return std::nullopt;
    const Lease found{it->second, it->first.second};
    idle.erase(it);
    counters.cached -= found.block_bytes;
    counters.in_use += found.block_bytes;
    counters.peak_in_use = std::max(counters.peak_in_use, counters.in_use);
    ++counters.reuses;
    return found;
  };
  if (auto found = reuse()) return *found;
  if (counters.pending > 0 && block_bytes <= limit &&
      counters.in_use + counters.pending + block_bytes > limit) {
    // Blocks of dropped handles whose copies are still finishing: wait for them, without the lock,
    // rather than fail.
    std::vector<SharedEvent> waits;
    for (const Pending& p : pending) waits.insert(waits.end(), p.after.begin(), p.after.end());
    lock.unlock();
    for (const SharedEvent& e : waits) (void)e->synchronize();
    lock.lock();
    sweep_locked();
    if (auto found = reuse()) return *found;
  }
  if (block_bytes > limit || counters.in_use + counters.pending + block_bytes > limit) {
    throw Error(Errc::out_of_memory, "pinned pool limit of " + std::to_string(limit) + " bytes reached: " +
                                         std::to_string(counters.in_use) + " in use, " +
                                         std::to_string(counters.pending) + " pending, asked for " +
                                         std::to_string(bytes) + " (raise Options::pool_limit_bytes or "
                                         "GPUXFER_POOL_LIMIT)");
  }
  auto unneeded = take_idle_locked(limit - block_bytes);
  // The new block counts as in use from here, so no other lease can pass the limit meanwhile; pinning
  // is slow (about 150 ms per 256 MiB with cudaHostAlloc) and runs without the lock.
  counters.in_use += block_bytes;
  counters.peak_in_use = std::max(counters.peak_in_use, counters.in_use);
  lock.unlock();
  release_later(std::move(unneeded));
  std::byte* block = nullptr;
  try {
    try {
      block = allocate(block_bytes, node, device);
    } catch (const Error& e) {
      if (e.code() != Errc::out_of_memory) throw;
      unpinning.drain();  // the blocks let go of may still hold the memory
      block = allocate(block_bytes, node, device);
    }
  } catch (...) {
    lock.lock();
    counters.in_use -= block_bytes;
    throw;
  }
  lock.lock();
  ++counters.allocations;
  lock.unlock();
  GPUXFER_LOG(debug, "pinned pool allocated " + std::to_string(block_bytes) + " bytes" +
                         (node >= 0 ? " on NUMA node " + std::to_string(node) : std::string{}));
  return {block, block_bytes};
}

void PoolState::give_back(std::byte* block, std::size_t block_bytes, int node) noexcept {
  std::lock_guard lock(mutex);
  counters.in_use -= block_bytes;
  try {
    idle.emplace(Key{node, block_bytes}, block);
    counters.cached += block_bytes;
  } catch (...) {
    release(block, Key{node, block_bytes}, device);
  }
}

void PoolState::give_back_after(std::byte* block, std::size_t block_bytes, int node,
                                std::vector<SharedEvent> after, int owner) noexcept {
  std::erase(after, nullptr);
  if (after.empty()) {
    give_back(block, block_bytes, node);
    return;
  }
  std::lock_guard lock(mutex);
  counters.in_use -= block_bytes;
  try {
    // Room first, so that the push below cannot throw once after is moved.
    if (pending.size() == pending.capacity()) pending.reserve(std::max<std::size_t>(8, 2 * pending.size()));
  } catch (...) {
    // Out of memory for the bookkeeping: wait for the GPU rather than hand out a busy block.
    for (const SharedEvent& e : after) (void)e->synchronize();
    release(block, Key{node, block_bytes}, device);
    return;
  }
  pending.push_back({block, Key{node, block_bytes}, std::move(after), owner, pending_order++});
  counters.pending += block_bytes;
}

void PoolState::wait_until_fewer_pending(std::size_t bytes, int node, int owner, std::size_t most) noexcept {
  // The blocks a lease of @p bytes could be served with (lease's reuse): this node, the size class up
  // to twice it.
  const std::size_t block_bytes = size_class(bytes);
  const auto serves = [&](const Key& key) {
    return key.first == node && key.second >= block_bytes && key.second / 2 <= block_bytes;
  };
  std::unique_lock lock(mutex);
  for (;;) {
    sweep_locked();
    const Pending* oldest = nullptr;
    std::size_t count = 0;
    for (const Pending& p : pending) {
      if (p.owner != owner || !serves(p.key)) continue;
      ++count;
      if (oldest == nullptr || p.order < oldest->order) oldest = &p;
    }
    if (count < most) return;
    std::vector<SharedEvent> waits;
    try {
      waits = oldest->after;
    } catch (...) {  // no memory for the copy of a few events: leave the bound to the pool's limit
      return;
    }
    lock.unlock();
    for (const SharedEvent& e : waits) {
      if (!gpu_done_with(e->synchronize()))
        return;  // CUDA will not wait now: leave the bound to the pool's limit
    }
    lock.lock();
  }
}

void PoolState::trim() noexcept {
  std::vector<std::pair<Key, std::byte*>> unneeded;
  {
    std::lock_guard lock(mutex);
    sweep_locked();
    try {
      unneeded = take_idle_locked(0);
    } catch (...) {  // no memory for the list: leave the cache as it is
      return;
    }
  }
  release_all(unneeded);
}

PoolStats PoolState::stats() noexcept {
  std::lock_guard lock(mutex);
  sweep_locked();
  PoolStats out = counters;
  out.limit = limit;
  return out;
}

PoolState& PoolState::of(PinnedPool& pool) noexcept { return *pool.state_; }

void PoolState::release_after(HostBuffer&& buffer, SharedEvent after) noexcept {
  std::vector<SharedEvent> events;
  if (after) {
    try {
      events.push_back(std::move(after));
    } catch (...) {  // no memory for a list of one: wait here rather than hand out a busy block
      (void)after->synchronize();
    }
  }
  release_after(std::move(buffer), std::move(events));
}

void PoolState::release_after(HostBuffer&& buffer, std::vector<SharedEvent> after, int owner) noexcept {
  // A view has no pool to hold it until the events: its owner may reuse the memory once let go, so the
  // work queued on it must be over first (no view is handed to queued work today; this is the safe side).
  if (buffer.keep_) {
    for (const SharedEvent& e : after) {
      if (e) (void)e->synchronize();
    }
  }
  if (buffer.pool_ && buffer.data_ != nullptr) {
    buffer.pool_->give_back_after(buffer.data_, buffer.block_bytes_, buffer.node_, std::move(after), owner);
  }
  buffer.keep_.reset();
  buffer.pool_.reset();
  buffer.data_ = nullptr;
  buffer.block_bytes_ = 0;
  buffer.size_ = 0;
  buffer.node_ = -1;
}

}  // namespace detail

PinnedPool::PinnedPool(std::size_t limit_bytes) : state_(std::make_shared<detail::PoolState>(limit_bytes)) {}

PinnedPool::~PinnedPool() = default;

HostBuffer PinnedPool::acquire(std::size_t bytes) { return acquire(bytes, -1); }

HostBuffer PinnedPool::acquire(std::size_t bytes, int numa_node) {
  if (bytes == 0) return HostBuffer{};
  // Checked before rounding up to a size class, which would overflow for sizes near SIZE_MAX.
  if (bytes > state_->limit) {
    throw Error(Errc::out_of_memory, "pinned pool limit of " + std::to_string(state_->limit) +
                                         " bytes is below the request: asked for " + std::to_string(bytes) +
                                         " (raise Options::pool_limit_bytes or GPUXFER_POOL_LIMIT)");
  }
  // With a limit near SIZE_MAX the size class itself would overflow: no host can pin half the address
  // space, so such a request is out of memory whatever the limit.
  if (bytes > std::numeric_limits<std::size_t>::max() / 2) {
    throw Error(Errc::out_of_memory, "pinned pool: a request of " + std::to_string(bytes) +
                                         " bytes is beyond any size class (at most " +
                                         std::to_string(std::numeric_limits<std::size_t>::max() / 2) + ")");
  }
  const std::size_t block_bytes = detail::PoolState::size_class(bytes);
  const detail::PoolState::Lease lease = state_->lease(block_bytes, bytes, numa_node);
  return HostBuffer(state_, lease.block, lease.block_bytes, bytes, numa_node);
}

void PinnedPool::trim() { state_->trim(); }

PoolStats PinnedPool::stats() const { return state_->stats(); }

}  // namespace gpuxfer
