#include "engine/downloads.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/chunk_ring.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/device_guard.hpp"
#include "runtime/drain.hpp"

namespace gpuxfer::detail {
namespace {

std::string describe(const ManagerState& m, const DeviceRange& src) {
  return "download of " + std::to_string(src.size) + " bytes on " + device_name(m, src.device);
}

}  // namespace

SharedEvent enqueue_download(ManagerState& m, const DeviceRange& src, std::byte* host) {
  DeviceStreams& s = m.streams_of(src.device);
  DeviceGuard guard(s.ordinal);
  const cudaStream_t stream = s.d2h.get();
  stream_wait(stream, src.ready);
  if (src.size != 0) {
    GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(host, src.ptr, src.size, cudaMemcpyDeviceToHost, stream),
                         describe(m, src));
  }
  return record_event(s.ordinal, stream);
}

std::vector<SharedEvent> download_pageable(ManagerState& m, std::span<const DeviceRange> sources,
                                           std::span<std::byte* const> outs) {
  struct Source {
    const DeviceRange& range;
    std::byte* out;
    ChunkRing ring;
  };
  std::vector<std::unique_ptr<Source>> active;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].size == 0) continue;
    active.push_back(std::unique_ptr<Source>(
        new Source{sources[i], outs[i],
                   ChunkRing(m.pool, sources[i].size, m.options.chunk_bytes, gpu_ring_slots, m.staging_node(sources[i].device))}));
  }
  DrainOnError drain;
  auto issue = [&](Source& src, std::size_t k) {
    DeviceStreams& s = m.streams_of(src.range.device);
    DeviceGuard guard(s.ordinal);
    const Chunk c = src.ring.chunk(k);
    GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(c.slot, src.range.ptr + c.offset, c.size, cudaMemcpyDeviceToHost, s.d2h.get()),
                         describe(m, src.range));
    src.ring.record(k, record_event(s.ordinal, s.d2h.get()));
  };
  std::size_t most = 0;
  for (auto& src : active) {
    DeviceStreams& s = m.streams_of(src->range.device);
    drain.add(s.d2h.get());
    DeviceGuard guard(s.ordinal);
    stream_wait(s.d2h.get(), src->range.ready);
    for (std::size_t k = 0; k < src->ring.slot_count(); ++k) issue(*src, k);
    most = std::max(most, src->ring.chunk_count());
  }
  // Round-robin over the sources so every link stays busy while the host copies one chunk out.
  for (std::size_t k = 0; k < most; ++k) {
    for (auto& src : active) {
      if (k >= src->ring.chunk_count()) continue;
      src->ring.host_wait(k, describe(m, src->range));
      const Chunk c = src->ring.chunk(k);
      m.host_copy(src->range.device).copy(src->out + c.offset, c.slot, c.size);
      if (k + src->ring.slot_count() < src->ring.chunk_count()) issue(*src, k + src->ring.slot_count());
    }
  }
  std::vector<SharedEvent> ends;
  for (const DeviceRange& r : sources) {
    DeviceStreams& s = m.streams_of(r.device);
    DeviceGuard guard(s.ordinal);
    ends.push_back(record_event(s.ordinal, s.d2h.get()));
  }
  return ends;
}

}  // namespace gpuxfer::detail
