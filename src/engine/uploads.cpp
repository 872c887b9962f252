#include "engine/uploads.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include "engine/chunk_ring.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/device_guard.hpp"
#include "runtime/drain.hpp"

namespace gpuxfer::detail {
namespace {

constexpr std::size_t share_granule = std::size_t{64} << 10;

// Hands out chunks of @p data: in place when it is @p pinned, else copied by @p device's host threads
// into a ChunkRing on its staging node, whose slot is refilled only after the uploads that read it completed.
class HostSource {
 public:
  HostSource(ManagerState& m, std::span<const std::byte> data, bool pinned, std::size_t chunk, std::size_t device)
      : m_(m), data_(data), device_(device) {
    if (!pinned) {
      ring_.emplace(m.pool, data.size(), chunk, host_ring_slots, m.staging_node(device));
    }
  }

  /// Pinned memory holding chunk @p k (bytes [offset, offset + len) of the data).
  const std::byte* chunk(std::size_t k, std::size_t offset, std::size_t len) {
    if (!ring_) return data_.data() + offset;
    ring_->host_wait(k, "broadcast staging");
    const Chunk c = ring_->chunk(k);
    m_.host_copy(device_).copy(c.slot, data_.data() + offset, len);
    return c.slot;
  }

  /// The uploads of chunk @p k are done after @p e.
  void used(std::size_t k, SharedEvent e) {
    if (ring_) ring_->record(k, std::move(e));
  }

 private:
  ManagerState& m_;
  std::span<const std::byte> data_;
  std::size_t device_;
  std::optional<ChunkRing> ring_;
};

void upload_chunk(ManagerState& m, const DeviceRange& dst, std::size_t offset, const std::byte* src,
                  std::size_t len) {
  DeviceStreams& s = m.streams_of(dst.device);
  GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(dst.ptr + offset, src, len, cudaMemcpyHostToDevice, s.h2d.get()),
                       "broadcast upload of " + std::to_string(len) + " bytes to " + device_name(m, dst.device));
}

std::vector<SharedEvent> per_device(ManagerState& m, std::span<const std::byte> data, bool pinned,
                                    std::span<const DeviceRange> targets) {
  const std::size_t n = data.size();
  const std::size_t chunk = pinned ? n : std::min(m.options.chunk_bytes, n);
  HostSource source(m, data, pinned, chunk, targets.front().device);
  DrainOnError drain;
  for (const DeviceRange& t : targets) {
    DeviceGuard guard(m.ordinal(t.device));
    drain.add(m.streams_of(t.device).h2d.get());
    stream_wait(m.streams_of(t.device).h2d.get(), t.ready);
  }
  for (std::size_t k = 0, offset = 0; offset < n; ++k, offset += chunk) {
    const std::size_t len = std::min(chunk, n - offset);
    const std::byte* src = source.chunk(k, offset, len);
    for (const DeviceRange& t : targets) {
      DeviceGuard guard(m.ordinal(t.device));
      upload_chunk(m, t, offset, src, len);
      source.used(k, record_event(m.ordinal(t.device), m.streams_of(t.device).h2d.get()));
    }
  }
  std::vector<SharedEvent> ends;
  for (const DeviceRange& t : targets) {
    DeviceGuard guard(m.ordinal(t.device));
    ends.push_back(record_event(m.ordinal(t.device), m.streams_of(t.device).h2d.get()));
  }
  return ends;  // the source's ring, if any, waits for them as it goes
}

std::vector<SharedEvent> scatter_allgather(ManagerState& m, std::span<const std::byte> data, bool pinned,
                                           std::span<const DeviceRange> targets) {
  const std::size_t n = data.size();
  const std::size_t k = targets.size();
  const std::size_t share = ((n + k - 1) / k + share_granule - 1) / share_granule * share_granule;
  const std::size_t chunk = std::min(m.options.chunk_bytes, share);
  HostSource source(m, data, pinned, chunk, targets.front().device);
  DrainOnError drain;
  // Each device's buffer is written by its own h2d stream and by every other device's d2d stream.
  for (const DeviceRange& a : targets) {
    DeviceStreams& s = m.streams_of(a.device);
    DeviceGuard guard(s.ordinal);
    drain.add(s.h2d.get());
    drain.add(s.d2d.get());
    stream_wait(s.h2d.get(), a.ready);
    for (const DeviceRange& b : targets) stream_wait(s.d2d.get(), b.ready);
  }
  for (std::size_t c = 0, offset = 0; offset < n; ++c, offset += chunk) {
    const std::size_t len = std::min(chunk, n - offset);
    const DeviceRange& owner = targets[c % k];
    DeviceStreams& s = m.streams_of(owner.device);
    const std::byte* src = source.chunk(c, offset, len);
    DeviceGuard guard(s.ordinal);
    upload_chunk(m, owner, offset, src, len);
    SharedEvent loaded = record_event(s.ordinal, s.h2d.get());
    source.used(c, loaded);
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
    DeviceStreams& s = m.streams_of(t.device);
    DeviceGuard guard(s.ordinal);
    ends.push_back(record_event(s.ordinal, s.h2d.get()));
    ends.push_back(record_event(s.ordinal, s.d2d.get()));
  }
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
