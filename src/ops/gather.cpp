// InterGpuTransfer's gathers: device buffers to pinned results, into caller memory, or into one
// device's memory. Every source is in flight at once, on its own stream.
#include <gpuxfer/inter_gpu_transfer.hpp>

#include <memory>
#include <string>

#include <nvtx3/nvtx3.hpp>

#include <gpuxfer/error.hpp>

#include "engine/device_copies.hpp"
#include "engine/downloads.hpp"
#include "engine/transfer_state.hpp"
#include "memory/host_memory.hpp"
#include "node/pointer_checks.hpp"

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

std::unique_ptr<detail::OperationState> queue_gather(detail::TransferState& t, std::optional<std::size_t> skip) {
  const auto ranges = sources(t, skip);
  // Lease every result first: running out of pinned memory then queues nothing.
  std::vector<HostBuffer> results;
  for (const auto& r : ranges) results.push_back(r ? t.m.pool.acquire(r->size, t.m.staging_node(r->device)) : HostBuffer{});
  auto op = std::make_unique<detail::OperationState>("gather");
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (!ranges[i] || ranges[i]->size == 0) {
      op->add_result(std::move(results[i]), nullptr);
      continue;
    }
    detail::SharedEvent written = detail::enqueue_download(t.m, *ranges[i], results[i].data());
    op->track(written, detail::device_name(t.m, ranges[i]->device));
    op->add_result(std::move(results[i]), std::move(written));
  }
  return op;
}

}  // namespace

GatherHandle InterGpuTransfer::gather(std::size_t dst_device) {
  nvtx3::scoped_range range{"gpuxfer::gather"};
  detail::check_index(state_->m, dst_device, "gather destination device");
  return GatherHandle(queue_gather(*state_, dst_device));
}

std::vector<HostBuffer> InterGpuTransfer::gather_blocking(std::size_t dst_device) {
  return gather(dst_device).get();
}

std::vector<HostBuffer> InterGpuTransfer::gather_all() {
  nvtx3::scoped_range range{"gpuxfer::gather_all"};
  return GatherHandle(queue_gather(*state_, std::nullopt)).get();
}

std::vector<GatherPiece> InterGpuTransfer::gather_into(std::span<std::byte> out,
                                                       std::optional<std::size_t> skip_device) {
  nvtx3::scoped_range range{"gpuxfer::gather_into"};
  if (skip_device) detail::check_index(state_->m, *skip_device, "gather_into skipped device");
  const auto ranges = sources(*state_, skip_device);
  std::size_t total = 0;
  std::vector<GatherPiece> pieces = layout(ranges, skip_device, total);
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
  if (detail::is_pinned_range(out.data(), total)) {
    detail::OperationState op("gather_into");
    for (std::size_t i = 0; i < present.size(); ++i) {
      op.track(detail::enqueue_download(state_->m, present[i], outs[i]), detail::device_name(state_->m, present[i].device));
    }
    op.wait();
  } else {
    detail::download_pageable(state_->m, present, outs);
  }
  return pieces;
}

std::vector<GatherPiece> InterGpuTransfer::gather_to_device(std::size_t dst_device, void* out, std::size_t capacity) {
  nvtx3::scoped_range range{"gpuxfer::gather_to_device"};
  detail::check_index(state_->m, dst_device, "gather_to_device destination device");
  (void)detail::validate_device_range(state_->m, dst_device, out, capacity, "gather_to_device output");
  const auto ranges = sources(*state_, std::nullopt);
  std::size_t total = 0;
  std::vector<GatherPiece> pieces = layout(ranges, std::nullopt, total);
  if (capacity < total) {
    throw Error(Errc::invalid_argument, "gather_to_device: the output on " + detail::device_name(state_->m, dst_device) +
                                            " holds " + std::to_string(capacity) + " bytes, the registered buffers need " +
                                            std::to_string(total));
  }
  detail::OperationState op("gather_to_device");
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (!ranges[i] || ranges[i]->size == 0) continue;
    const detail::DeviceRange target{dst_device, static_cast<std::byte*>(out) + pieces[i].offset, ranges[i]->size, nullptr};
    // Each source pushes on its own stream, so every link into dst is busy at once.
    op.track(detail::enqueue_device_copy(state_->m, *ranges[i], target, i, op),
               detail::device_name(state_->m, i));
  }
  op.wait();
  return pieces;
}

}  // namespace gpuxfer
