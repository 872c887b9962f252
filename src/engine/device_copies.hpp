// Device-to-device copies queued on the node's streams, each waiting for the events its inputs depend on
// and returning the event its output is ready at.
#pragma once

#include <cstddef>

#include "engine/device_range.hpp"
#include "engine/operation_state.hpp"
#include "node/manager_state.hpp"

namespace gpuxfer::detail {

/// Queues a peer copy src -> dst (both ranges' ready events waited for) on @p stream_owner's d2d
/// stream. The two devices must have peer access, or be the same device.
SharedEvent enqueue_peer_copy(ManagerState& m, const DeviceRange& src, const DeviceRange& dst,
                              std::size_t stream_owner);

/// Queues a copy src -> dst through a ChunkRing: the download of chunk k+1 overlaps the upload of
/// chunk k, entirely on the GPU side (no host thread waits). @p op holds the ring until the returned
/// event has completed. @throws Error(Errc::out_of_memory) for the ring
SharedEvent enqueue_staged_copy(ManagerState& m, const DeviceRange& src, const DeviceRange& dst,
                                OperationState& op);

/// Device-to-device copy by the best path: local or peer (on @p stream_owner's d2d stream) when
/// possible, else staged.
SharedEvent enqueue_device_copy(ManagerState& m, const DeviceRange& src, const DeviceRange& dst,
                                std::size_t stream_owner, OperationState& op);

}  // namespace gpuxfer::detail
