#include "engine/chunk_ring.hpp"

#include <algorithm>
#include <utility>

#include "memory/pool_state.hpp"
#include "runtime/cuda_check.hpp"

namespace gpuxfer::detail {

ChunkRing::ChunkRing(PinnedPool& pool, std::size_t total, std::size_t chunk_bytes, std::size_t slots, int node)
    : chunk_bytes_(std::max<std::size_t>(1, std::min(chunk_bytes, total))),
      total_(total),
      chunks_((total + chunk_bytes_ - 1) / chunk_bytes_) {
  const std::size_t count = std::min(slots, chunks_);
  slots_.reserve(count);
  for (std::size_t i = 0; i < count; ++i) slots_.push_back(pool.acquire(chunk_bytes_, node));
  users_.resize(count);
}

ChunkRing::~ChunkRing() {
  // A slot whose last copies CUDA would not wait for (an event recorded inside a capture) waits for
  // them in the pool.
  for (std::size_t i = 0; i < users_.size(); ++i) {
    std::vector<SharedEvent> busy;
    for (const SharedEvent& e : users_[i]) wait_or_keep(e, busy);
    if (!busy.empty() && i < slots_.size()) release_after(std::move(slots_[i]), std::move(busy));
  }
}

Chunk ChunkRing::chunk(std::size_t k) noexcept {
  const std::size_t offset = k * chunk_bytes_;
  return {offset, std::min(chunk_bytes_, total_ - offset), slots_[k % slots_.size()].data()};
}

void ChunkRing::record(std::size_t k, SharedEvent done) { users_[k % users_.size()].push_back(std::move(done)); }

void ChunkRing::gpu_wait(std::size_t k, cudaStream_t stream) {
  auto& users = users_[k % users_.size()];
  for (const SharedEvent& e : users) stream_wait(stream, e);
  users.clear();
}

void ChunkRing::release_to(OperationState& op, const SharedEvent& last) {
  for (HostBuffer& slot : slots_) op.hold(std::move(slot), last);
  slots_.clear();
  for (auto& users : users_) users.clear();
}

}  // namespace gpuxfer::detail
