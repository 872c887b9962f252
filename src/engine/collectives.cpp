#include "engine/collectives.hpp"

#include <mutex>
#include <string>
#include <vector>

#include <nccl.h>

#include "runtime/cuda_check.hpp"
#include "runtime/device_guard.hpp"

namespace gpuxfer::detail {

void enqueue_nccl_broadcast(ManagerState& m, std::span<const DeviceRange> ranges, std::size_t root,
                            OperationState& op) {
  const std::vector<ncclComm_t>& comms = m.nccl.get(m.ordinals());
  const std::size_t bytes = ranges[root].size;
  for (const DeviceRange& r : ranges) {
    DeviceStreams& s = m.streams_of(r.device);
    DeviceGuard guard(s.ordinal);
    stream_wait(s.d2d.get(), r.ready);
    stream_wait(s.d2d.get(), ranges[root].ready);
  }
  {
    std::lock_guard lock(m.nccl.launch_mutex());
    GPUXFER_NCCL_TRY_CTX(ncclGroupStart(), "broadcast_from_device");
    for (const DeviceRange& r : ranges) {
      const void* send = r.device == root ? static_cast<const void*>(r.ptr) : nullptr;
      const ncclResult_t result = ncclBroadcast(send, r.ptr, bytes, ncclUint8, static_cast<int>(root),
                                                comms[r.device], m.streams_of(r.device).d2d.get());
      if (result != ncclSuccess) {
        (void)ncclGroupEnd();
        GPUXFER_NCCL_TRY_CTX(result, "broadcast_from_device on " + device_name(m, r.device));
      }
    }
    GPUXFER_NCCL_TRY_CTX(ncclGroupEnd(), "broadcast_from_device of " + std::to_string(bytes) + " bytes");
  }
  for (const DeviceRange& r : ranges) {
    DeviceStreams& s = m.streams_of(r.device);
    DeviceGuard guard(s.ordinal);
    op.track(record_event(s.ordinal, s.d2d.get()), device_name(m, r.device));
  }
}

}  // namespace gpuxfer::detail
