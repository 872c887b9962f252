#include "engine/uploads.hpp"

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>

#include <gpuxfer/detail/device_guard.hpp>

#include "engine/host_pipeline.hpp"
#include "memory/host_copy_workers.hpp"
#include "memory/streaming_copy.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/drain.hpp"

namespace gpuxfer::detail {
namespace {

constexpr std::size_t share_granule = std::size_t{64} << 10;

// How many rings of one size the uploads through one device's upload stream (the ring's owner: the
// first target) may leave behind them in the pool while the GPU has not yet copied out of them: a caller
// queueing uploads faster than the stream runs them waits for one of these to complete rather than pin
// ever more memory. Uploads through another device's stream are not held up by them.
constexpr std::size_t rings_ahead = 2;

// Hands out chunks of @p data: in place when it is @p pinned; else staged in a StagingRing on @p device's
// staging node. A transfer of one chunk is copied in by this thread with every worker; a longer one by the
// device's host copy workers, each a chunk at a time ahead of the uploads, into a slot whose uploads of the
// chunk before have completed. The caller queues chunk k's uploads, hands their events to used() and then
// calls queued(k), in chunk order, and at the end gives the ring back behind the events that follow every
// upload (give_back_after): a transfer that fits the ring so returns once staged, whatever the GPU still
// has to do before its uploads run.
class HostSource {
 public:
  HostSource(ManagerState& m, std::span<const std::byte> data, bool pinned, const ChunkPlan& plan,
             std::size_t device)
      : m_(m), data_(data), device_(device) {
    if (pinned) return;
    HostCopyWorkers& workers = m.host_copy(device);
    ring_.emplace(m.pool, plan, 2 * workers.size(), m.staging_node(device), static_cast<int>(device),
                  rings_ahead);
    if (ring_->chunk_count() > 1) {
      team_.emplace(workers, std::min(workers.size(), ring_->chunk_count()), [this] { fill(); });
    }
  }
  ~HostSource() {
    stop_.stop();
    team_.reset();  // the workers return before the ring goes
  }
  HostSource(const HostSource&) = delete;
  HostSource& operator=(const HostSource&) = delete;

  /// Pinned memory holding chunk @p k (bytes [offset, offset + len) of the data).
  /// @throws Error when a worker failed waiting for a slot's uploads
  const std::byte* chunk(std::size_t k, std::size_t offset, std::size_t len) {
    if (!ring_) return data_.data() + offset;
    StagingSlot& slot = ring_->slot(k);
    if (!team_) {
      m_.host_copy(device_).copy(slot.data, data_.data() + offset, len);
      return slot.data;
    }
    if (!stop_.wait_until([&] { return slot.staged.load(std::memory_order_acquire) == k + 1; })) {
      stop_.rethrow();
      throw Error(Errc::cuda_error, "broadcast staging stopped without an error");
    }
    return slot.data;
  }

  /// An upload of chunk @p k is done after @p e.
  void used(std::size_t k, SharedEvent e) {
    if (ring_) ring_->slot(k).gpu.push_back(std::move(e));
  }

  /// Every upload of chunk @p k is queued (and given to used()).
  void queued(std::size_t k) {
    if (team_) ring_->slot(k).released.store(k + 1, std::memory_order_release);
  }

  /// Every chunk is queued, and @p after follows all of their uploads: the ring goes back to the pool
  /// once those complete, and nothing here waits for them.
  void give_back_after(std::vector<SharedEvent> after) {
    if (!ring_) return;
    team_.reset();  // every chunk was staged: the workers are returning
    ring_->give_back_after(std::move(after));
  }

 private:
  // One worker: the next chunk into its slot, once that slot's last uploads have completed. Streaming
  // stores: on the one-GPU runner they gave 0.71-0.74 x the link, where libc's memcpy gave 0.58-0.61 and
  // ordinary vector stores 0.57-0.58.
  void fill() {
    for (;;) {
      const std::size_t k = next_.fetch_add(1, std::memory_order_relaxed);
      if (k >= ring_->chunk_count() || stop_.stopped()) return;
      StagingSlot& slot = ring_->slot(k);
      if (!stop_.wait_until([&] { return ring_->free_for(k); })) return;
      if (!wait_for_slot(slot, stop_, "broadcast staging")) return;
      slot.gpu.clear();
      copy_streaming(slot.data, data_.data() + ring_->offset(k), ring_->size(k));
      slot.staged.store(k + 1, std::memory_order_release);
    }
  }

  ManagerState& m_;
  std::span<const std::byte> data_;
  std::size_t device_;
  std::optional<StagingRing> ring_;
  PipelineStop stop_;
  std::atomic<std::size_t> next_{0};
  std::optional<CopyTeam> team_;
};

void upload_chunk(ManagerState& m, const DeviceRange& dst, std::size_t offset, const std::byte* src,
                  std::size_t len) {
  DeviceStreams& s = streams_for(m, dst);
  GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(dst.ptr + offset, src, len, cudaMemcpyHostToDevice, s.h2d.get()),
                       "broadcast upload of " + std::to_string(len) + " bytes to " + device_name(m, dst.device));
}

std::vector<SharedEvent> per_device(ManagerState& m, std::span<const std::byte> data, bool pinned,
                                    std::span<const DeviceRange> targets) {
  // From pageable memory the first chunks taper: the link waits for the first one's copy in.
  const std::size_t workers = m.host_copy(targets.front().device).size();
  const ChunkPlan plan = pinned ? ChunkPlan(data.size(), data.size())
                                : ChunkPlan(data.size(), host_chunk(m.options), workers, Taper::at_start);
  HostSource source(m, data, pinned, plan, targets.front().device);
  DrainOnError drain;
  for (const DeviceRange& t : targets) {
    DeviceGuard guard(m.ordinal(t.device));
    drain.add(streams_for(m, t).h2d.get());
    stream_wait(streams_for(m, t).h2d.get(), t.ready);
  }
  for (std::size_t k = 0; k < plan.count(); ++k) {
    const std::size_t offset = plan.offset(k);
    const std::size_t len = plan.size(k);
    const std::byte* src = source.chunk(k, offset, len);
    for (const DeviceRange& t : targets) {
      DeviceGuard guard(m.ordinal(t.device));
      upload_chunk(m, t, offset, src, len);
      source.used(k, record_event(m.ordinal(t.device), streams_for(m, t).h2d.get()));
    }
    source.queued(k);
  }
  std::vector<SharedEvent> ends;
  for (const DeviceRange& t : targets) {
    DeviceGuard guard(m.ordinal(t.device));
    ends.push_back(record_event(m.ordinal(t.device), streams_for(m, t).h2d.get()));
  }
  source.give_back_after(ends);
  return ends;
}

std::vector<SharedEvent> scatter_allgather(ManagerState& m, std::span<const std::byte> data, bool pinned,
                                           std::span<const DeviceRange> targets) {
  const std::size_t n = data.size();
  const std::size_t k = targets.size();
  const std::size_t share = ((n + k - 1) / k + share_granule - 1) / share_granule * share_granule;
  const std::size_t chunk = std::min(pinned ? m.options.chunk_bytes : host_chunk(m.options), share);
  HostSource source(m, data, pinned, ChunkPlan(n, chunk), targets.front().device);
  DrainOnError drain;
  // Each device's buffer is written by its own h2d stream and by every other device's d2d stream.
  for (const DeviceRange& a : targets) {
    DeviceStreams& s = streams_for(m, a);
    DeviceGuard guard(s.ordinal);
    drain.add(s.h2d.get());
    drain.add(s.d2d.get());
    stream_wait(s.h2d.get(), a.ready);
    for (const DeviceRange& b : targets) stream_wait(s.d2d.get(), b.ready);
  }
  for (std::size_t c = 0, offset = 0; offset < n; ++c, offset += chunk) {
    const std::size_t len = std::min(chunk, n - offset);
    const DeviceRange& owner = targets[c % k];
    DeviceStreams& s = streams_for(m, owner);
    const std::byte* src = source.chunk(c, offset, len);
    DeviceGuard guard(s.ordinal);
    upload_chunk(m, owner, offset, src, len);
    SharedEvent loaded = record_event(s.ordinal, s.h2d.get());
    source.used(c, loaded);
    source.queued(c);
    stream_wait(s.d2d.get(), loaded);
    for (const DeviceRange& other : targets) {
      if (other.device == owner.device) continue;
      GPUXFER_CUDA_TRY_CTX(cudaMemcpyPeerAsync(other.ptr + offset, m.ordinal(other.device), owner.ptr + offset,
                                               s.ordinal, len, s.d2d.get()),
                           "broadcast forward of " + std::to_string(len) + " bytes from " +
                               device_name(m, owner.device) + " to " + device_name(m, other.device));
    }
  }
  std::vector<SharedEvent> ends;
  for (const DeviceRange& t : targets) {
    DeviceStreams& s = streams_for(m, t);
    DeviceGuard guard(s.ordinal);
    ends.push_back(record_event(s.ordinal, s.h2d.get()));
    ends.push_back(record_event(s.ordinal, s.d2d.get()));
  }
  // The slots are read by the owners' uploads alone: the ring waits for the h2d ends only.
  std::vector<SharedEvent> uploaded;
  for (std::size_t i = 0; i < ends.size(); i += 2) uploaded.push_back(ends[i]);
  source.give_back_after(std::move(uploaded));
  return ends;
}

}  // namespace

std::vector<SharedEvent> upload_to_all(ManagerState& m, std::span<const std::byte> data,
                                       std::span<const DeviceRange> targets, UploadMode mode, bool pinned) {
  if (data.empty() || targets.empty()) return {};
  if (mode == UploadMode::scatter_allgather && targets.size() > 1) return scatter_allgather(m, data, pinned, targets);
  return per_device(m, data, pinned, targets);
}

}  // namespace gpuxfer::detail
