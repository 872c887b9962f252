#include "transfer_engine.hpp"

#include <algorithm>
#include <string>

#include <gpuxfer/error.hpp>

#include "cuda_check.hpp"

namespace gpuxfer::detail {
namespace {

std::string sized(const ManagerImpl& m, const char* what, std::size_t device, std::size_t bytes) {
  return std::string(what) + " of " + std::to_string(bytes) + " bytes on " + device_name(m, device);
}

// Waits (best effort, ignoring errors) for @p streams: used only on a failure half-way, so that pinned
// chunks go back to the pool after the copies already queued into them are done.
void drain(std::initializer_list<cudaStream_t> streams) noexcept {
  for (cudaStream_t s : streams) (void)cudaStreamSynchronize(s);
  (void)cudaGetLastError();
}

constexpr std::size_t ring_slots = 3;

}  // namespace

DeviceRange range_of(const ManagerImpl& m, std::size_t device, const Registration& reg) {
  recheck(m, device, reg);
  return {device, static_cast<std::byte*>(reg.ptr), reg.size, reg.ready};
}

bool is_pinned(const void* ptr) noexcept {
  if (ptr == nullptr) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

SharedEvent enqueue_download(ManagerImpl& m, const DeviceRange& src, std::byte* host) {
  DeviceContext& ctx = m.context(src.device);
  DeviceGuard guard(ctx.ordinal);
  const cudaStream_t stream = ctx.download.get();
  stream_wait(stream, src.ready);
  if (src.size != 0) {
    GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(host, src.ptr, src.size, cudaMemcpyDeviceToHost, stream),
                         sized(m, "download", src.device, src.size));
  }
  return record_event(ctx.ordinal, stream);
}

SharedEvent enqueue_peer_copy(ManagerImpl& m, const DeviceRange& src, const DeviceRange& dst,
                              std::size_t stream_owner) {
  DeviceContext& ctx = m.context(stream_owner);
  DeviceGuard guard(ctx.ordinal);
  const cudaStream_t stream = ctx.peer.get();
  stream_wait(stream, src.ready);
  stream_wait(stream, dst.ready);
  if (src.size != 0) {
    const std::string what = sized(m, "peer copy", src.device, src.size) + " to " + device_name(m, dst.device);
    if (src.device == dst.device) {
      GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(dst.ptr, src.ptr, src.size, cudaMemcpyDeviceToDevice, stream), what);
    } else {
      GPUXFER_CUDA_TRY_CTX(cudaMemcpyPeerAsync(dst.ptr, m.ordinal(dst.device), src.ptr, m.ordinal(src.device),
                                               src.size, stream),
                           what);
    }
  }
  return record_event(ctx.ordinal, stream);
}

SharedEvent enqueue_staged_copy(ManagerImpl& m, const DeviceRange& src, const DeviceRange& dst, Completion& done) {
  DeviceContext& s = m.context(src.device);
  DeviceContext& d = m.context(dst.device);
  const std::size_t n = src.size;
  const std::size_t chunk = std::max<std::size_t>(1, std::min(m.options.chunk_bytes, n));
  const std::size_t chunks = (n + chunk - 1) / chunk;
  const std::size_t slots = std::min(ring_slots, chunks);
  std::vector<HostBuffer> ring;
  for (std::size_t i = 0; i < slots; ++i) ring.push_back(m.pool.acquire(chunk));
  std::vector<SharedEvent> downloaded;
  std::vector<SharedEvent> freed;
  for (std::size_t i = 0; i < slots; ++i) {
    downloaded.push_back(make_event(s.ordinal));
    freed.push_back(make_event(d.ordinal));
  }
  const cudaStream_t down = s.download.get();
  const cudaStream_t up = d.upload.get();
  try {
    stream_wait(down, src.ready);
    stream_wait(up, dst.ready);
    const std::string what = sized(m, "staged copy", src.device, n) + " to " + device_name(m, dst.device);
    for (std::size_t k = 0; k < chunks; ++k) {
      const std::size_t slot = k % slots;
      const std::size_t offset = k * chunk;
      const std::size_t len = std::min(chunk, n - offset);
      {
        DeviceGuard guard(s.ordinal);
        if (k >= slots) stream_wait(down, freed[slot]);  // the slot's previous upload has read it
        GPUXFER_CUDA_TRY_CTX(
            cudaMemcpyAsync(ring[slot].data(), src.ptr + offset, len, cudaMemcpyDeviceToHost, down), what);
        downloaded[slot]->record(down);
      }
      DeviceGuard guard(d.ordinal);
      stream_wait(up, downloaded[slot]);
      GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(dst.ptr + offset, ring[slot].data(), len, cudaMemcpyHostToDevice, up),
                           what);
      freed[slot]->record(up);
    }
    DeviceGuard guard(d.ordinal);
    SharedEvent last = record_event(d.ordinal, up);
    for (auto& buffer : ring) done.hold(std::move(buffer), last);
    return last;
  } catch (...) {
    drain({down, up});
    throw;
  }
}

SharedEvent enqueue_device_copy(ManagerImpl& m, const DeviceRange& src, const DeviceRange& dst,
                                std::size_t stream_owner, Completion& done) {
  if (src.device == dst.device || m.peer[src.device][dst.device] != 0) {
    return enqueue_peer_copy(m, src, dst, stream_owner);
  }
  return enqueue_staged_copy(m, src, dst, done);
}

void download_pageable(ManagerImpl& m, std::span<const DeviceRange> sources, std::span<std::byte* const> outs) {
  const std::size_t chunk = m.options.chunk_bytes;
  struct Source {
    const DeviceRange* range;
    std::byte* out;
    std::size_t chunks;
    std::vector<HostBuffer> ring;
    std::vector<SharedEvent> ready;
  };
  std::vector<Source> active;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].size == 0) continue;
    const std::size_t chunks = (sources[i].size + chunk - 1) / chunk;
    active.push_back({&sources[i], outs[i], chunks, {}, {}});
    const std::size_t slots = std::min(ring_slots, chunks);
    for (std::size_t k = 0; k < slots; ++k) {
      active.back().ring.push_back(m.pool.acquire(std::min(chunk, sources[i].size)));
    }
  }
  auto issue = [&](Source& src, std::size_t k) {
    const DeviceRange& r = *src.range;
    DeviceContext& ctx = m.context(r.device);
    DeviceGuard guard(ctx.ordinal);
    const std::size_t offset = k * chunk;
    const std::size_t len = std::min(chunk, r.size - offset);
    const std::size_t slot = k % src.ring.size();
    GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(src.ring[slot].data(), r.ptr + offset, len, cudaMemcpyDeviceToHost,
                                         ctx.download.get()),
                         sized(m, "download", r.device, r.size));
    src.ready[slot] = record_event(ctx.ordinal, ctx.download.get());
  };
  try {
    std::size_t most = 0;
    for (Source& src : active) {
      DeviceGuard guard(m.ordinal(src.range->device));
      stream_wait(m.context(src.range->device).download.get(), src.range->ready);
      src.ready.resize(src.ring.size());
      for (std::size_t k = 0; k < src.ring.size(); ++k) issue(src, k);
      most = std::max(most, src.chunks);
    }
    // Round-robin over the sources so every link stays busy while the host copies one chunk out.
    for (std::size_t k = 0; k < most; ++k) {
      for (Source& src : active) {
        if (k >= src.chunks) continue;
        const std::size_t slot = k % src.ring.size();
        GPUXFER_CUDA_TRY_CTX(cudaEventSynchronize(src.ready[slot]->get()),
                             sized(m, "download", src.range->device, src.range->size));
        const std::size_t offset = k * chunk;
        m.host_copy.copy(src.out + offset, src.ring[slot].data(), std::min(chunk, src.range->size - offset));
        if (k + src.ring.size() < src.chunks) issue(src, k + src.ring.size());
      }
    }
  } catch (...) {
    for (Source& src : active) drain({m.context(src.range->device).download.get()});
    throw;
  }
}

}  // namespace gpuxfer::detail
