// broadcast_from_device: one device's buffer to every other device, through NCCL or peer copies.
#include <gpuxfer/inter_gpu_transfer.hpp>

#include <mutex>
#include <string>

#include <nccl.h>
#include <nvtx3/nvtx3.hpp>

#include <gpuxfer/error.hpp>

#include "cuda_check.hpp"
#include "transfer_engine.hpp"

namespace gpuxfer {
namespace {

void nccl_broadcast(detail::ManagerImpl& m, const std::vector<detail::DeviceRange>& ranges, std::size_t root,
                    detail::Completion& done) {
  const std::vector<ncclComm_t>& comms = m.nccl.get(m.ordinals());
  const std::size_t bytes = ranges[root].size;
  for (const detail::DeviceRange& r : ranges) {
    detail::DeviceContext& ctx = m.context(r.device);
    detail::DeviceGuard guard(ctx.ordinal);
    detail::stream_wait(ctx.peer.get(), r.ready);
    detail::stream_wait(ctx.peer.get(), ranges[root].ready);
  }
  {
    std::lock_guard lock(m.nccl.launch_mutex());
    GPUXFER_NCCL_TRY_CTX(ncclGroupStart(), "broadcast_from_device");
    for (const detail::DeviceRange& r : ranges) {
      const void* send = r.device == root ? static_cast<const void*>(r.ptr) : nullptr;
      const ncclResult_t result = ncclBroadcast(send, r.ptr, bytes, ncclUint8, static_cast<int>(root),
                                                comms[r.device], m.context(r.device).peer.get());
      if (result != ncclSuccess) {
        (void)ncclGroupEnd();
        GPUXFER_NCCL_TRY_CTX(result, "broadcast_from_device on " + detail::device_name(m, r.device));
      }
    }
    GPUXFER_NCCL_TRY_CTX(ncclGroupEnd(), "broadcast_from_device of " + std::to_string(bytes) + " bytes");
  }
  for (const detail::DeviceRange& r : ranges) {
    detail::DeviceContext& ctx = m.context(r.device);
    detail::DeviceGuard guard(ctx.ordinal);
    done.track(detail::record_event(ctx.ordinal, ctx.peer.get()), detail::device_name(m, r.device));
  }
}

}  // namespace

void InterGpuTransfer::broadcast_from_device(std::size_t root, DeviceBroadcastPath path) {
  nvtx3::scoped_range range{"gpuxfer::broadcast_from_device"};
  detail::ManagerImpl& m = impl_->m;
  detail::check_index(m, root, "broadcast_from_device root");
  const auto snapshot = impl_->registry.snapshot();
  std::vector<detail::DeviceRange> ranges;
  for (std::size_t i = 0; i < snapshot.size(); ++i) {
    if (!snapshot[i]) {
      throw Error(Errc::invalid_buffer, "broadcast_from_device: no buffer is registered on " + detail::device_name(m, i) +
                                            " (call set_device_buffer first)");
    }
    ranges.push_back(detail::range_of(m, i, *snapshot[i]));
  }
  const std::size_t bytes = ranges[root].size;
  for (const auto& r : ranges) {
    if (r.size < bytes) {
      throw Error(Errc::invalid_argument, "broadcast_from_device: the root's " + std::to_string(bytes) +
                                              " bytes do not fit the buffer of " + std::to_string(r.size) +
                                              " bytes registered on " + detail::device_name(m, r.device));
    }
  }
  if (path == DeviceBroadcastPath::nccl && m.nccl_version == 0) {
    throw Error(Errc::unsupported, std::string("broadcast_from_device: NCCL is ") +
                                       (m.options.enable_nccl ? "not available" : "disabled (Options::enable_nccl, GPUXFER_NCCL)"));
  }
  if (ranges.size() < 2 || bytes == 0) return;
  // Two peer-connected devices: one direct copy beats NCCL's protocol; beyond that NCCL's pipelined
  // ring spreads the root's outgoing traffic where direct copies would all leave the root at once.
  const bool use_nccl = path == DeviceBroadcastPath::nccl ||
                        (path == DeviceBroadcastPath::automatic && m.nccl_version != 0 &&
                         !(m.all_peers && ranges.size() == 2));
  detail::Completion done("broadcast_from_device");
  if (use_nccl) {
    nccl_broadcast(m, ranges, root, done);
  } else {
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      if (i == root) continue;
      detail::DeviceRange src = ranges[root];
      src.size = bytes;
      done.track(detail::enqueue_device_copy(m, src, ranges[i], i, done), detail::device_name(m, i));
    }
  }
  done.wait();
}

}  // namespace gpuxfer
