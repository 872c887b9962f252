#include "engine/downloads.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <gpuxfer/detail/device_guard.hpp>

#include "cuda/copy_kernels.hpp"
#include "engine/host_pipeline.hpp"
#include "memory/host_copy_workers.hpp"
#include "memory/host_memory.hpp"
#include "memory/streaming_copy.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/drain.hpp"

namespace gpuxfer::detail {
namespace {

std::string describe(const ManagerState& m, const DeviceRange& src) {
  return "download of " + std::to_string(src.size) + " bytes on " + device_name(m, src.device);
}

}  // namespace

SharedEvent enqueue_download(ManagerState& m, const DeviceRange& src, std::byte* host, Queued queued) {
  DeviceStreams& s = streams_for(m, src);
  DeviceGuard guard(s.ordinal);
  const cudaStream_t stream = src.own_stream != nullptr ? src.own_stream : s.d2h.get();
  stream_wait(stream, src.ready);
  // A kernel node only where the copy kernel moves 16-byte vectors, as measured; byte-wise, not measured.
  if (queued == Queued::captured && m.options.capture_copy_kernels && src.size <= captured_kernel_copy_max &&
      copy_moves_vectors(host, src.ptr) && device_maps_pinned_range(host, src.size)) {
    GPUXFER_CUDA_TRY_CTX(launch_copy(host, src.ptr, src.size, stream), describe(m, src));
  } else if (src.size != 0) {
    GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(host, src.ptr, src.size, cudaMemcpyDeviceToHost, stream),
                         describe(m, src));
  }
  return record_event(s.ordinal, stream);
}

namespace {

struct PageableSource {
  const DeviceRange& range;
  std::byte* out;
  StagingRing ring;
  std::size_t queued = 0;  // chunks whose copy into the ring is queued
};

// Queues the D2H of chunk k of @p src into its slot and publishes it to the workers.
void queue_chunk(ManagerState& m, PageableSource& src, std::size_t k) {
  DeviceStreams& s = streams_for(m, src.range);
  DeviceGuard guard(s.ordinal);
  StagingSlot& slot = src.ring.slot(k);
  GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(slot.data, src.range.ptr + src.ring.offset(k), src.ring.size(k),
                                       cudaMemcpyDeviceToHost, s.d2h.get()),
                       describe(m, src.range));
  slot.gpu.assign(1, record_event(s.ordinal, s.d2h.get()));
  slot.staged.store(k + 1, std::memory_order_release);
}

// One copy worker of a pageable download: takes the next chunk of @p order (its set's sources, round
// robin), waits for it to land in its slot, copies it out and frees the slot.
struct CopyOut {
  explicit CopyOut(HostCopyWorkers& set) : workers(set) {}
  HostCopyWorkers& workers;
  std::vector<std::pair<PageableSource*, std::size_t>> order;
  std::atomic<std::size_t> next{0};

  void run(ManagerState& m, PipelineStop& stop) {
    for (;;) {
      const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= order.size() || stop.stopped()) return;
      auto [src, k] = order[i];
      StagingSlot& slot = src->ring.slot(k);
      if (!stop.wait_until([&] { return slot.staged.load(std::memory_order_acquire) == k + 1; })) return;
      if (!wait_for_slot(slot, stop, describe(m, src->range))) return;
      copy_streaming(src->out + src->ring.offset(k), slot.data, src->ring.size(k));
      slot.released.store(k + 1, std::memory_order_release);
    }
  }
};

}  // namespace

std::vector<SharedEvent> download_pageable(ManagerState& m, std::span<const DeviceRange> sources,
                                           std::span<std::byte* const> outs) {
  const std::size_t chunk = host_chunk(m.options);
  std::vector<std::unique_ptr<PageableSource>> active;
  bool pipelined = false;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].size == 0) continue;
    const std::size_t workers = m.host_copy(sources[i].device).size();
    const ChunkPlan plan(sources[i].size, chunk, workers, Taper::at_end);
    active.push_back(std::unique_ptr<PageableSource>(new PageableSource{
        sources[i], outs[i], StagingRing(m.pool, plan, 2 * workers, m.staging_node(sources[i].device))}));
    pipelined = pipelined || active.back()->ring.chunk_count() > 1;
  }
  DrainOnError drain;
  for (auto& src : active) {
    DeviceStreams& s = streams_for(m, src->range);
    drain.add(s.d2h.get());
    DeviceGuard guard(s.ordinal);
    stream_wait(s.d2h.get(), src->range.ready);
  }
  if (!pipelined) {
    // One chunk each: queue them all, then copy each out with every worker (small ones on this thread).
    for (auto& src : active) queue_chunk(m, *src, 0);
    for (auto& src : active) {
      StagingSlot& slot = src->ring.slot(0);
      GPUXFER_CUDA_TRY_CTX(slot.gpu.front()->synchronize(), describe(m, src->range));
      m.host_copy(src->range.device).copy(src->out, slot.data, src->range.size);
    }
  } else {
    // The workers of each set copy its sources' chunks out; this thread queues the copies into the slots.
    std::vector<std::unique_ptr<CopyOut>> sets;
    auto set_of = [&](HostCopyWorkers& w) -> CopyOut& {
      const auto it = std::find_if(sets.begin(), sets.end(), [&](const auto& set) { return &set->workers == &w; });
      return it != sets.end() ? **it : *sets.emplace_back(std::make_unique<CopyOut>(w));
    };
    std::size_t most = 0;
    for (auto& src : active) most = std::max(most, src->ring.chunk_count());
    for (std::size_t k = 0; k < most; ++k) {
      for (auto& src : active) {
        if (k < src->ring.chunk_count()) set_of(m.host_copy(src->range.device)).order.emplace_back(src.get(), k);
      }
    }
    PipelineStop stop;
    std::vector<std::unique_ptr<CopyTeam>> teams;
    StopOnExit stop_on_exit(stop);
    for (const auto& owned : sets) {
      CopyOut* set = owned.get();
      const std::size_t members = std::min(set->workers.size(), set->order.size());
      teams.push_back(std::make_unique<CopyTeam>(set->workers, members, [&m, &stop, set] { set->run(m, stop); }));
    }
    auto queueable = [](const PageableSource& src) {
      return src.queued < src.ring.chunk_count() && src.ring.free_for(src.queued);
    };
    try {
      for (;;) {
        bool left = false;
        for (auto& src : active) {
          if (queueable(*src)) {
            queue_chunk(m, *src, src->queued);
            ++src->queued;
          }
          left = left || src->queued < src->ring.chunk_count();
        }
        if (!left) break;
        const bool any = stop.wait_until([&] {
          return std::any_of(active.begin(), active.end(), [&](const auto& src) { return queueable(*src); });
        });
        if (!any) break;  // a worker failed
      }
    } catch (...) {
      stop.fail(std::current_exception());
    }
    for (auto& team : teams) team->join();
    stop.rethrow();
  }
  std::vector<SharedEvent> ends;
  for (const DeviceRange& r : sources) {
    DeviceStreams& s = streams_for(m, r);
    DeviceGuard guard(s.ordinal);
    ends.push_back(record_event(s.ordinal, s.d2h.get()));
  }
  return ends;
}

}  // namespace gpuxfer::detail
