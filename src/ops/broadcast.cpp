// InterGpuTransfer's broadcasts: host bytes into every device (broadcast), and one device's buffer into
// every other device (broadcast_from_device, through NCCL or peer copies).
#include <gpuxfer/inter_gpu_transfer.hpp>

#include <string>
#include <vector>

#include <nvtx3/nvtx3.hpp>

#include <gpuxfer/error.hpp>

#include "engine/collectives.hpp"
#include "engine/device_copies.hpp"
#include "engine/ordering.hpp"
#include "engine/transfer_state.hpp"
#include "engine/uploads.hpp"
#include "memory/host_memory.hpp"
#include "runtime/drain.hpp"

namespace gpuxfer {
namespace {

void queue_broadcast(detail::TransferState& t, std::span<const std::byte> data, HostBroadcastPath path,
                     const detail::CallerStreams& caller) {
  detail::ManagerState& m = t.m;
  const detail::RegistrySnapshot snapshot = t.registry.snapshot();
  std::vector<detail::DeviceRange> targets;
  for (std::size_t i = 0; i < snapshot.size(); ++i) {
    targets.push_back(snapshot.require(i, "broadcast"));
    detail::check_fits(m, data.size(), targets.back(), "broadcast");
  }
  if (!data.empty() && data.data() == nullptr) throw Error(Errc::invalid_argument, "broadcast: data is null");
  if (path == HostBroadcastPath::scatter_allgather && targets.size() > 1 && !m.all_peers) {
    throw Error(Errc::unsupported, "broadcast: scatter_allgather needs peer access between every pair of devices");
  }
  if (data.empty() || targets.empty()) return;
  const bool scatter = path == HostBroadcastPath::scatter_allgather ||
                       (path == HostBroadcastPath::automatic && m.all_peers && targets.size() > 1);
  // Asked once: with a registration or a driver query it is not free, and both paths need it.
  const bool pinned = detail::is_pinned_range(data.data(), data.size());
  detail::OperationOrder order(m, caller, "broadcast");
  if (!pinned) order.refuse_capture("the data is pageable memory, which host threads stage; use pinned memory");
  for (auto& r : targets) order.add(r, detail::Access::write);
  order.begin();
  // Should ordering fail after the uploads are queued, they finish before the caller gets @p data back.
  detail::DrainOnError drain;
  for (const auto& r : targets) {
    drain.add(detail::streams_for(m, r).h2d.get());
    drain.add(detail::streams_for(m, r).d2d.get());
  }
  const std::vector<detail::SharedEvent> ends = detail::upload_to_all(
      m, data, targets, scatter ? detail::UploadMode::scatter_allgather : detail::UploadMode::per_device, pinned);
  order.done_all(ends);
  order.join();
  if (!caller.any()) {
    detail::OperationState op("broadcast of " + std::to_string(data.size()) + " bytes");
    // per_device: one event per target; scatter_allgather: two (its upload stream, its forwarding one).
    const std::size_t per_target = ends.size() / targets.size();
    for (std::size_t i = 0; i < ends.size(); ++i) op.track(ends[i], detail::device_name(m, targets[i / per_target].device));
    op.wait();
  }
}

void queue_broadcast_from_device(detail::TransferState& t, std::size_t root, DeviceBroadcastPath path,
                                 std::optional<cudaStream_t> caller) {
  detail::ManagerState& m = t.m;
  detail::check_index(m, root, "broadcast_from_device root");
  const detail::RegistrySnapshot snapshot = t.registry.snapshot();
  std::vector<detail::DeviceRange> ranges;
  for (std::size_t i = 0; i < snapshot.size(); ++i) ranges.push_back(snapshot.require(i, "broadcast_from_device"));
  const std::size_t bytes = ranges[root].size;
  for (const auto& r : ranges) {
    if (r.size < bytes) {
      throw Error(Errc::invalid_argument, "broadcast_from_device: the root's " + std::to_string(bytes) +
                                              " bytes do not fit the buffer of " + std::to_string(r.size) +
                                              " bytes registered on " + detail::device_name(m, r.device));
    }
  }
  if (path == DeviceBroadcastPath::nccl && m.nccl_version == 0) {
    throw Error(Errc::unsupported, "broadcast_from_device: NCCL is " + m.nccl_status);
  }
  if (ranges.size() < 2 || bytes == 0) return;
  // Two peer-connected devices: one direct copy beats NCCL's protocol; beyond that NCCL's pipelined
  // ring spreads the root's outgoing traffic where direct copies would all leave the root at once.
  const bool use_nccl = path == DeviceBroadcastPath::nccl ||
                        (path == DeviceBroadcastPath::automatic && m.nccl_version != 0 &&
                         !(m.all_peers && ranges.size() == 2));
  detail::OperationOrder order(m, caller, "broadcast_from_device");
  if (!use_nccl && !m.all_peers) {
    order.refuse_capture("a device without peer access to the root is staged through the pinned pool; use NCCL");
  }
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    order.add(ranges[i], i == root ? detail::Access::read : detail::Access::write);
  }
  order.begin();
  detail::OperationState op("broadcast_from_device");
  // Should a later device fail (its staging ring out of pinned memory), the copies already queued into
  // the other devices' buffers finish before the caller gets them back; so do NCCL's kernels once launched.
  detail::DrainOnError drain;
  for (std::size_t i = 0; !use_nccl && i < ranges.size(); ++i) {
    if (i == root) continue;
    drain.add(detail::streams_for(m, ranges[i]).d2d.get());
    drain.add(detail::streams_for(m, ranges[i]).h2d.get());
    drain.add(detail::streams_for(m, ranges[root]).d2h.get());
  }
  if (use_nccl) {
    detail::enqueue_nccl_broadcast(m, ranges, root, op);
    // Launched on every device: should the ordering below fail, the kernels end before the buffers go
    // back to the caller.
    for (const auto& r : ranges) drain.add(detail::streams_for(m, r).nccl.get());
  } else {
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      if (i == root) continue;
      detail::DeviceRange src = ranges[root];
      src.size = bytes;
      op.track(detail::enqueue_device_copy(m, src, ranges[i], i, op), detail::device_name(m, i));
    }
  }
  std::vector<detail::SharedEvent> ends;
  for (const auto& [event, device] : op.events) ends.push_back(event);
  order.done_all(ends);
  order.join();
  if (order.capturing()) op.events.clear();  // captured events are the graph's: never waited on
  if (!caller) op.wait();
}

}  // namespace

void InterGpuTransfer::broadcast(std::span<const std::byte> data, HostBroadcastPath path) {
  nvtx3::scoped_range range{"gpuxfer::broadcast"};
  queue_broadcast(*state_, data, path, std::nullopt);
}

void InterGpuTransfer::broadcast_async(std::span<const std::byte> data, cudaStream_t stream, HostBroadcastPath path) {
  nvtx3::scoped_range range{"gpuxfer::broadcast_async"};
  queue_broadcast(*state_, data, path, stream);
}

void InterGpuTransfer::broadcast_async(std::span<const std::byte> data, std::span<const cudaStream_t> streams,
                                       HostBroadcastPath path) {
  nvtx3::scoped_range range{"gpuxfer::broadcast_async"};
  queue_broadcast(*state_, data, path, detail::CallerStreams(streams));
}

void InterGpuTransfer::broadcast_from_device(std::size_t root, DeviceBroadcastPath path) {
  nvtx3::scoped_range range{"gpuxfer::broadcast_from_device"};
  queue_broadcast_from_device(*state_, root, path, std::nullopt);
}

void InterGpuTransfer::broadcast_from_device_async(std::size_t root, cudaStream_t stream, DeviceBroadcastPath path) {
  nvtx3::scoped_range range{"gpuxfer::broadcast_from_device_async"};
  queue_broadcast_from_device(*state_, root, path, stream);
}

}  // namespace gpuxfer
