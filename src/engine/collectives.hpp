// NCCL collectives over the node's devices, queued on their nccl streams (used by nothing else).
#pragma once

#include <cstddef>
#include <span>

#include "engine/device_range.hpp"
#include "engine/operation_state.hpp"
#include "node/manager_state.hpp"

namespace gpuxfer::detail {

/// Queues ncclBroadcast of ranges[root]'s first ranges[root].size bytes into every other range (one
/// per device, rank i = device i), on every device's nccl stream after every range's ready event. Groups
/// of concurrent callers are queued one at a time (NcclComms::launch_mutex). @p op tracks its completion.
/// @throws Error(Errc::nccl_error) naming the device whose launch failed
void enqueue_nccl_broadcast(ManagerState& m, std::span<const DeviceRange> ranges, std::size_t root,
                            OperationState& op);

}  // namespace gpuxfer::detail
