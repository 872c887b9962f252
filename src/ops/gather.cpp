// InterGpuTransfer's gathers: device buffers to pinned results, into caller memory, or into one
// device's memory. Every source is in flight at once, on its own stream.
#include <gpuxfer/inter_gpu_transfer.hpp>

#include <memory>
#include <string>

#include <nvtx3/nvtx3.hpp>

#include <gpuxfer/error.hpp>

#include "engine/device_copies.hpp"
#include "engine/downloads.hpp"
#include "engine/ordering.hpp"
#include "engine/transfer_state.hpp"
#include "memory/host_memory.hpp"
#include "node/pointer_checks.hpp"
#include "runtime/drain.hpp"

namespace gpuxfer {
namespace {

// The registered ranges of every device but @p skip, re-checked; a device without a buffer has none.
std::vector<std::optional<detail::DeviceRange>> sources(detail::TransferState& t, std::optional<std::size_t> skip) {
  return t.registry.snapshot().present(skip);
}

std::vector<GatherPiece> layout(const std::vector<std::optional<detail::DeviceRange>>& ranges,
                                std::optional<std::size_t> skip, std::size_t& total) {
  std::vector<GatherPiece> pieces;
  total = 0;
  std::size_t device = 0;
  for (const auto& r : ranges) {
    if (skip && device == *skip) ++device;
    const std::size_t size = r ? r->size : 0;
    pieces.push_back({device, total, size});
    total += size;
    ++device;
  }
  return pieces;
}

std::unique_ptr<detail::OperationState> queue_gather(detail::TransferState& t, std::optional<std::size_t> skip,
                                                     const detail::CallerStreams& caller) {
  auto ranges = sources(t, skip);
  detail::OperationOrder order(t.m, caller, "gather");
  order.refuse_capture(
      "its results are leased from the pinned pool at each call; capture gather_into_async into pinned memory");
  // Lease every result first: running out of pinned memory then queues nothing.
  std::vector<HostBuffer> results;
  for (const auto& r : ranges) results.push_back(r ? t.m.pool.acquire(r->size, t.m.staging_node(r->device)) : HostBuffer{});
  for (auto& r : ranges) {
    if (r && r->size != 0) order.add(*r, detail::Access::read, detail::OwnStream::allowed);
  }
  order.begin();
  // Should a later step fail (an event not recorded after its download was queued), the downloads already
  // queued finish before their results go back to the pool: declared after the results, it runs first.
  detail::DrainOnError drain;
  for (const auto& r : ranges) {
    if (r && r->size != 0)
      drain.add(r->own_stream != nullptr ? r->own_stream : detail::streams_for(t.m, *r).d2h.get());
  }
  auto op = std::make_unique<detail::OperationState>("gather");
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (!ranges[i] || ranges[i]->size == 0) {
      op->add_result(std::move(results[i]), nullptr);
      continue;
    }
    detail::SharedEvent written = detail::enqueue_download(t.m, *ranges[i], results[i].data());
    order.done(*ranges[i], {written});
    op->track(written, detail::device_name(t.m, ranges[i]->device));
    op->add_result(std::move(results[i]), std::move(written));
  }
  order.join();
  return op;
}

std::vector<GatherPiece> queue_gather_into(detail::TransferState& t, std::span<std::byte> out,
                                           std::optional<std::size_t> skip, const detail::CallerStreams& caller) {
  if (skip) detail::check_index(t.m, *skip, "gather_into skipped device");
  auto ranges = sources(t, skip);
  std::size_t total = 0;
  std::vector<GatherPiece> pieces = layout(ranges, skip, total);
  if (out.size() < total) {
    throw Error(Errc::invalid_argument, "gather_into: the output holds " + std::to_string(out.size()) +
                                            " bytes, the registered buffers need " + std::to_string(total));
  }
  if (total == 0) return pieces;
  if (out.data() == nullptr) throw Error(Errc::invalid_argument, "gather_into: the output is null");
  std::vector<detail::DeviceRange> present;
  std::vector<std::byte*> outs;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (!ranges[i] || ranges[i]->size == 0) continue;
    present.push_back(*ranges[i]);
    outs.push_back(out.data() + pieces[i].offset);
  }
  const bool pinned = detail::is_pinned_range(out.data(), total);
  detail::OperationOrder order(t.m, caller, "gather_into");
  if (!pinned) {
    order.refuse_capture("the output is pageable memory, which host threads fill; register it (register_host) or "
                         "use pinned memory");
  }
  for (auto& r : present) order.add(r, detail::Access::read, pinned ? detail::OwnStream::allowed : detail::OwnStream::no);
  order.begin();
  detail::OperationState op("gather_into");
  // Should a later source fail, the copies already queued into @p out finish before the caller gets it back.
  detail::DrainOnError drain;
  for (const auto& r : present)
    drain.add(r.own_stream != nullptr ? r.own_stream : detail::streams_for(t.m, r).d2h.get());
  for (std::size_t i = 0; pinned && i < present.size(); ++i) {
    detail::SharedEvent written = detail::enqueue_download(
        t.m, present[i], outs[i], order.capturing() ? detail::Queued::captured : detail::Queued::run);
    order.done(present[i], {written});
    if (!order.capturing()) op.track(std::move(written), detail::device_name(t.m, present[i].device));
  }
  if (!pinned) {
    // Blocks until the bytes are in @p out: the copies that read the sources are then done.
    const std::vector<detail::SharedEvent> ends = detail::download_pageable(t.m, present, outs);
    for (std::size_t i = 0; i < present.size(); ++i) order.done(present[i], {ends[i]});
  }
  order.join();
  if (!caller.any()) op.wait();  // the blocking form; a stream-ordered one is done when its stream gets there
  return pieces;
}

std::vector<GatherPiece> queue_gather_to_device(detail::TransferState& t, std::size_t dst_device, void* out,
                                                std::size_t capacity, cudaStream_t caller, detail::OperationState& op) {
  detail::check_index(t.m, dst_device, "gather_to_device destination device");
  (void)detail::validate_device_range(t.m, dst_device, out, capacity, "gather_to_device output");
  auto ranges = sources(t, std::nullopt);
  std::size_t total = 0;
  std::vector<GatherPiece> pieces = layout(ranges, std::nullopt, total);
  if (capacity < total) {
    throw Error(Errc::invalid_argument, "gather_to_device: the output on " + detail::device_name(t.m, dst_device) +
                                            " holds " + std::to_string(capacity) + " bytes, the registered buffers need " +
                                            std::to_string(total));
  }
  detail::OperationOrder order(t.m, caller, "gather_to_device");
  std::vector<detail::DeviceRange> targets(ranges.size());
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (!ranges[i] || ranges[i]->size == 0) continue;
    if (i != dst_device && t.m.peer[i][dst_device] == 0) {
      order.refuse_capture("a source without peer access to the destination is staged through the pinned pool");
    }
    targets[i] = {dst_device, static_cast<std::byte*>(out) + pieces[i].offset, ranges[i]->size, {}, nullptr};
    order.add(*ranges[i], detail::Access::read);
    order.add(targets[i], detail::Access::write);
  }
  order.begin();
  // Should a later source fail (its staging ring out of pinned memory), the copies already queued into
  // @p out finish before the caller gets it back: every stream a source's copy may queue on.
  detail::DrainOnError drain;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (!ranges[i] || ranges[i]->size == 0) continue;
    drain.add(detail::streams_for(t.m, *ranges[i]).d2d.get());
    drain.add(detail::streams_for(t.m, *ranges[i]).d2h.get());
    drain.add(detail::streams_for(t.m, targets[i]).h2d.get());
  }
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (!ranges[i] || ranges[i]->size == 0) continue;
    // Each source pushes on its own stream, so every link into dst is busy at once.
    detail::SharedEvent copied = detail::enqueue_device_copy(t.m, *ranges[i], targets[i], i, op);
    order.done(*ranges[i], {copied});
    order.done(targets[i], {copied});
    if (!order.capturing()) op.track(std::move(copied), detail::device_name(t.m, i));
  }
  order.join();
  return pieces;
}

}  // namespace

GatherHandle InterGpuTransfer::gather(std::size_t dst_device) {
  nvtx3::scoped_range range{"gpuxfer::gather"};
  detail::check_index(state_->m, dst_device, "gather destination device");
  return GatherHandle(queue_gather(*state_, dst_device, std::nullopt));
}

GatherHandle InterGpuTransfer::gather_async(std::size_t dst_device, cudaStream_t stream) {
  nvtx3::scoped_range range{"gpuxfer::gather_async"};
  detail::check_index(state_->m, dst_device, "gather destination device");
  return GatherHandle(queue_gather(*state_, dst_device, stream));
}

std::vector<HostBuffer> InterGpuTransfer::gather_blocking(std::size_t dst_device) {
  return gather(dst_device).get();
}

std::vector<HostBuffer> InterGpuTransfer::gather_all() {
  nvtx3::scoped_range range{"gpuxfer::gather_all"};
  return GatherHandle(queue_gather(*state_, std::nullopt, std::nullopt)).get();
}

GatherHandle InterGpuTransfer::gather_async(std::size_t dst_device, std::span<const cudaStream_t> streams) {
  nvtx3::scoped_range range{"gpuxfer::gather_async"};
  detail::check_index(state_->m, dst_device, "gather destination device");
  return GatherHandle(queue_gather(*state_, dst_device, detail::CallerStreams(streams)));
}

GatherHandle InterGpuTransfer::gather_all_async(cudaStream_t stream) {
  nvtx3::scoped_range range{"gpuxfer::gather_all_async"};
  return GatherHandle(queue_gather(*state_, std::nullopt, stream));
}

GatherHandle InterGpuTransfer::gather_all_async(std::span<const cudaStream_t> streams) {
  nvtx3::scoped_range range{"gpuxfer::gather_all_async"};
  return GatherHandle(queue_gather(*state_, std::nullopt, detail::CallerStreams(streams)));
}

std::vector<GatherPiece> InterGpuTransfer::gather_into(std::span<std::byte> out,
                                                       std::optional<std::size_t> skip_device) {
  nvtx3::scoped_range range{"gpuxfer::gather_into"};
  return queue_gather_into(*state_, out, skip_device, std::nullopt);
}

std::vector<GatherPiece> InterGpuTransfer::gather_into_async(std::span<std::byte> out, cudaStream_t stream,
                                                             std::optional<std::size_t> skip_device) {
  nvtx3::scoped_range range{"gpuxfer::gather_into_async"};
  return queue_gather_into(*state_, out, skip_device, stream);
}

std::vector<GatherPiece> InterGpuTransfer::gather_into_async(std::span<std::byte> out,
                                                             std::span<const cudaStream_t> streams,
                                                             std::optional<std::size_t> skip_device) {
  nvtx3::scoped_range range{"gpuxfer::gather_into_async"};
  return queue_gather_into(*state_, out, skip_device, detail::CallerStreams(streams));
}

std::vector<GatherPiece> InterGpuTransfer::gather_to_device(std::size_t dst_device, void* out, std::size_t capacity) {
  nvtx3::scoped_range range{"gpuxfer::gather_to_device"};
  // Ordered with the legacy default stream of each device, as cudaMemcpy is: the output is caller memory.
  detail::OperationState op("gather_to_device");
  std::vector<GatherPiece> pieces = queue_gather_to_device(*state_, dst_device, out, capacity, cudaStreamLegacy, op);
  op.wait();
  return pieces;
}

std::vector<GatherPiece> InterGpuTransfer::gather_to_device_async(std::size_t dst_device, void* out,
                                                                  std::size_t capacity, cudaStream_t stream) {
  nvtx3::scoped_range range{"gpuxfer::gather_to_device_async"};
  detail::OperationState op("gather_to_device");  // holds staging until the GPU is done with it
  return queue_gather_to_device(*state_, dst_device, out, capacity, stream, op);
}

}  // namespace gpuxfer
