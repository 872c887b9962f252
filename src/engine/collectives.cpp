#include "engine/collectives.hpp"

#include <mutex>
#include <string>
#include <vector>

#include <nccl.h>

#include <gpuxfer/detail/device_guard.hpp>

#include "runtime/cuda_check.hpp"
#include "runtime/drain.hpp"

namespace gpuxfer::detail {

void enqueue_nccl_broadcast(ManagerState& m, std::span<const DeviceRange> ranges, std::size_t root,
                            OperationState& op) {
  const std::vector<ncclComm_t>& comms = m.nccl.get(m.ordinals());
  const std::size_t bytes = ranges[root].size;
  // A group's kernels spin until every rank's kernel runs. They go on streams that nothing else queues on
  // (DeviceStreams::nccl): on the d2d streams a copy that waits for another device's later work could
  // slip in between two ranks' launches and close a cycle across the devices. One group at a time, its
  // waits, launch and events together, so that every device's nccl stream holds the groups in one order.
  std::lock_guard lock(m.nccl.launch_mutex());
  for (const DeviceRange& r : ranges) {
    DeviceStreams& s = streams_for(m, r);
    DeviceGuard guard(s.ordinal);
    stream_wait(s.nccl.get(), r.ready);
    stream_wait(s.nccl.get(), ranges[root].ready);
  }
  {
    // NCCL switches devices itself and restores the device it found: a device of ours, made current by a
    // guard that then restores the caller's context (on a thread without one NCCL would select device 0).
    DeviceGuard guard(m.ordinal(root));
    GPUXFER_NCCL_TRY_CTX(ncclGroupStart(), "broadcast_from_device");
    for (const DeviceRange& r : ranges) {
      const void* send = r.device == root ? static_cast<const void*>(r.ptr) : nullptr;
      const ncclResult_t result = ncclBroadcast(send, r.ptr, bytes, ncclUint8, static_cast<int>(root),
                                                comms[r.device], streams_for(m, r).nccl.get());
      if (result != ncclSuccess) {
        (void)ncclGroupEnd();
        GPUXFER_NCCL_TRY_CTX(result, "broadcast_from_device on " + device_name(m, r.device));
      }
    }
    GPUXFER_NCCL_TRY_CTX(ncclGroupEnd(), "broadcast_from_device of " + std::to_string(bytes) + " bytes");
  }
  // The group is launched on every device: should an event fail now, it finishes before the buffers go
  // back to the caller (a group that failed to launch is not drained: its kernels would wait for each other).
  DrainOnError drain;
  for (const DeviceRange& r : ranges) drain.add(streams_for(m, r).nccl.get());
  for (const DeviceRange& r : ranges) {
    DeviceStreams& s = streams_for(m, r);
    DeviceGuard guard(s.ordinal);
    op.track(record_event(s.ordinal, s.nccl.get()), device_name(m, r.device));
  }
}

}  // namespace gpuxfer::detail
