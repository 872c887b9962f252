#include "engine/device_copies.hpp"

#include <string>

#include <gpuxfer/detail/device_guard.hpp>

#include "engine/chunk_ring.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/drain.hpp"

namespace gpuxfer::detail {
namespace {

std::string describe(const ManagerState& m, const char* what, const DeviceRange& src, const DeviceRange& dst) {
  return std::string(what) + " of " + std::to_string(src.size) + " bytes on " + device_name(m, src.device) +
         " to " + device_name(m, dst.device);
}

}  // namespace

SharedEvent enqueue_peer_copy(ManagerState& m, const DeviceRange& src, const DeviceRange& dst,
                              std::size_t stream_owner) {
  DeviceStreams& s = streams_for(m, stream_owner == src.device ? src : dst);
  DeviceGuard guard(s.ordinal);
  const cudaStream_t stream = s.d2d.get();
  stream_wait(stream, src.ready);
  stream_wait(stream, dst.ready);
  if (src.size != 0) {
    const std::string what = describe(m, "peer copy", src, dst);
    if (src.device == dst.device) {
      GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(dst.ptr, src.ptr, src.size, cudaMemcpyDeviceToDevice, stream), what);
    } else {
      GPUXFER_CUDA_TRY_CTX(cudaMemcpyPeerAsync(dst.ptr, m.ordinal(dst.device), src.ptr, m.ordinal(src.device),
                                               src.size, stream),
                           what);
    }
  }
  return record_event(s.ordinal, stream);
}

SharedEvent enqueue_staged_copy(ManagerState& m, const DeviceRange& src, const DeviceRange& dst,
                                OperationState& op) {
  DeviceStreams& s = streams_for(m, src);
  DeviceStreams& d = streams_for(m, dst);
  ChunkRing ring(m.pool, src.size, m.options.chunk_bytes, gpu_ring_slots, m.staging_node(src.device));
  const cudaStream_t down = s.d2h.get();
  const cudaStream_t up = d.h2d.get();
  DrainOnError drain;
  drain.add(down);
  drain.add(up);
  {
    DeviceGuard guard(s.ordinal);  // under each stream's device: a thread with no context gets none
    stream_wait(down, src.ready);
  }
  {
    DeviceGuard guard(d.ordinal);
    stream_wait(up, dst.ready);
  }
  const std::string what = describe(m, "staged copy", src, dst);
  for (std::size_t k = 0; k < ring.chunk_count(); ++k) {
    const Chunk c = ring.chunk(k);
    SharedEvent downloaded;
    {
      DeviceGuard guard(s.ordinal);
      ring.gpu_wait(k, down);  // the slot's previous upload has read it
      GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(c.slot, src.ptr + c.offset, c.size, cudaMemcpyDeviceToHost, down), what);
      downloaded = record_event(s.ordinal, down);
      ring.record(k, downloaded);  // the slot is written from here: its end waits for this too
    }
    DeviceGuard guard(d.ordinal);
    stream_wait(up, downloaded);
    GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(dst.ptr + c.offset, c.slot, c.size, cudaMemcpyHostToDevice, up), what);
    ring.record(k, record_event(d.ordinal, up));
  }
  DeviceGuard guard(d.ordinal);
  SharedEvent last = record_event(d.ordinal, up);
  ring.release_to(op, last);
  return last;
}

SharedEvent enqueue_device_copy(ManagerState& m, const DeviceRange& src, const DeviceRange& dst,
                                std::size_t stream_owner, OperationState& op) {
  if (src.device == dst.device || m.peer[src.device][dst.device] != 0) {
    return enqueue_peer_copy(m, src, dst, stream_owner);
  }
  return enqueue_staged_copy(m, src, dst, op);
}

}  // namespace gpuxfer::detail
