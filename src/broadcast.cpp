// Host bytes to several devices: in place from pinned memory, through pinned chunks from pageable
// memory; each device loading everything over its own link, or a share of it and forwarding that share
// to the others over peer links (scatter + all-gather), pipelined in chunks.
#include <algorithm>
#include <string>

#include "cuda_check.hpp"
#include "transfer_engine.hpp"

namespace gpuxfer::detail {
namespace {

constexpr std::size_t staging_slots = 4;
constexpr std::size_t share_granule = std::size_t{64} << 10;

// Hands out chunks of @p data, copied into a ring of pinned slots by the host threads when @p data is
// pageable; a slot is refilled only after the event of its last upload has completed.
class HostSource {
 public:
  HostSource(ManagerImpl& m, std::span<const std::byte> data, std::size_t chunk)
      : m_(m), data_(data), pinned_(is_pinned(data.data())) {
    if (pinned_) return;
    const std::size_t chunks = (data.size() + chunk - 1) / chunk;
    for (std::size_t i = 0; i < std::min(staging_slots, chunks); ++i) ring_.push_back(m.pool.acquire(chunk));
    last_use_.resize(ring_.size());
  }

  // Never hand a slot back to the pool while an upload may still read it.
  ~HostSource() {
    for (const auto& uses : last_use_) {
      for (const SharedEvent& e : uses) (void)cudaEventSynchronize(e->get());
    }
    (void)cudaGetLastError();
  }
  HostSource(const HostSource&) = delete;
  HostSource& operator=(const HostSource&) = delete;

  /// Pinned memory holding bytes [offset, offset + len) of the data, for chunk number @p k.
  const std::byte* chunk(std::size_t k, std::size_t offset, std::size_t len) {
    if (pinned_) return data_.data() + offset;
    const std::size_t slot = k % ring_.size();
    for (const SharedEvent& e : last_use_[slot]) {
      GPUXFER_CUDA_TRY_CTX(cudaEventSynchronize(e->get()), "broadcast staging");
    }
    last_use_[slot].clear();
    m_.host_copy.copy(ring_[slot].data(), data_.data() + offset, len);
    return ring_[slot].data();
  }

  /// The uploads of chunk @p k are done after @p e.
  void used(std::size_t k, SharedEvent e) {
    if (!pinned_) last_use_[k % ring_.size()].push_back(std::move(e));
  }

 private:
  ManagerImpl& m_;
  std::span<const std::byte> data_;
  bool pinned_;
  std::vector<HostBuffer> ring_;
  std::vector<std::vector<SharedEvent>> last_use_;
};

void upload_chunk(ManagerImpl& m, const DeviceRange& dst, std::size_t offset, const std::byte* src,
                  std::size_t len) {
  DeviceContext& ctx = m.context(dst.device);
  GPUXFER_CUDA_TRY_CTX(
      cudaMemcpyAsync(dst.ptr + offset, src, len, cudaMemcpyHostToDevice, ctx.upload.get()),
      "broadcast upload of " + std::to_string(len) + " bytes to " + device_name(m, dst.device));
}

void per_device(ManagerImpl& m, std::span<const std::byte> data, std::span<const DeviceRange> targets,
                Completion& done) {
  const std::size_t n = data.size();
  const std::size_t chunk = is_pinned(data.data()) ? n : std::min(m.options.chunk_bytes, n);
  HostSource source(m, data, chunk);
  for (const DeviceRange& t : targets) {
    DeviceGuard guard(m.ordinal(t.device));
    stream_wait(m.context(t.device).upload.get(), t.ready);
  }
  for (std::size_t k = 0, offset = 0; offset < n; ++k, offset += chunk) {
    const std::size_t len = std::min(chunk, n - offset);
    const std::byte* src = source.chunk(k, offset, len);
    for (const DeviceRange& t : targets) {
      DeviceGuard guard(m.ordinal(t.device));
      upload_chunk(m, t, offset, src, len);
      source.used(k, record_event(m.ordinal(t.device), m.context(t.device).upload.get()));
    }
  }
  for (const DeviceRange& t : targets) {
    DeviceGuard guard(m.ordinal(t.device));
    done.track(record_event(m.ordinal(t.device), m.context(t.device).upload.get()), device_name(m, t.device));
  }
  done.wait();
}

void scatter_allgather(ManagerImpl& m, std::span<const std::byte> data, std::span<const DeviceRange> targets,
                       Completion& done) {
  const std::size_t n = data.size();
  const std::size_t k = targets.size();
  const std::size_t share = ((n + k - 1) / k + share_granule - 1) / share_granule * share_granule;
  const std::size_t chunk = std::min(m.options.chunk_bytes, share);
  HostSource source(m, data, chunk);
  // Each device's buffer is written by its own upload stream and by every other device's peer stream.
  for (const DeviceRange& a : targets) {
    DeviceContext& ctx = m.context(a.device);
    DeviceGuard guard(ctx.ordinal);
    stream_wait(ctx.upload.get(), a.ready);
    for (const DeviceRange& b : targets) stream_wait(ctx.peer.get(), b.ready);
  }
  for (std::size_t c = 0, offset = 0; offset < n; ++c, offset += chunk) {
    const std::size_t len = std::min(chunk, n - offset);
    const DeviceRange& owner = targets[c % k];
    DeviceContext& ctx = m.context(owner.device);
    const std::byte* src = source.chunk(c, offset, len);
    DeviceGuard guard(ctx.ordinal);
    upload_chunk(m, owner, offset, src, len);
    SharedEvent loaded = record_event(ctx.ordinal, ctx.upload.get());
    source.used(c, loaded);
    stream_wait(ctx.peer.get(), loaded);
    for (const DeviceRange& other : targets) {
      if (other.device == owner.device) continue;
      GPUXFER_CUDA_TRY_CTX(cudaMemcpyPeerAsync(other.ptr + offset, m.ordinal(other.device), owner.ptr + offset,
                                               ctx.ordinal, len, ctx.peer.get()),
                           "broadcast forward of " + std::to_string(len) + " bytes from " +
                               device_name(m, owner.device) + " to " + device_name(m, other.device));
    }
  }
  for (const DeviceRange& t : targets) {
    DeviceContext& ctx = m.context(t.device);
    DeviceGuard guard(ctx.ordinal);
    done.track(record_event(ctx.ordinal, ctx.upload.get()), device_name(m, t.device));
    done.track(record_event(ctx.ordinal, ctx.peer.get()), device_name(m, t.device));
  }
  done.wait();
}

}  // namespace

void upload_to_all(ManagerImpl& m, std::span<const std::byte> data, std::span<const DeviceRange> targets,
                   UploadMode mode) {
  if (data.empty() || targets.empty()) return;
  Completion done("broadcast of " + std::to_string(data.size()) + " bytes");
  try {
    if (mode == UploadMode::scatter_allgather && targets.size() > 1) {
      scatter_allgather(m, data, targets, done);
    } else {
      per_device(m, data, targets, done);
    }
  } catch (...) {
    // Let every queued copy finish before the staging ring goes back to the pool.
    for (const DeviceRange& t : targets) {
      (void)cudaStreamSynchronize(m.context(t.device).upload.get());
      (void)cudaStreamSynchronize(m.context(t.device).peer.get());
    }
    (void)cudaGetLastError();
    throw;
  }
}

}  // namespace gpuxfer::detail
