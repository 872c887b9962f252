// Host bytes to one or several devices: in place from pinned memory, through a StagingRing filled by host
// threads from pageable memory.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "engine/device_range.hpp"
#include "node/manager_state.hpp"

namespace gpuxfer::detail {

/// How a host buffer reaches several devices.
enum class UploadMode {
  per_device,         // every device loads everything over its own host link
  scatter_allgather,  // every device loads a share and forwards it to the others over peer links
};

/// Queues the writes of @p data into every range of @p targets (each at least data.size() bytes), after
/// each range's ready events, and returns the events after which every target holds the bytes. From
/// pinned memory (@p pinned) nothing waits on the host: @p data must stay as it is until those events
/// complete. From pageable memory host threads copy it through a StagingRing, and this returns once every
/// byte is staged (@p data is free again then): at once when it fits the ring's slots (2 x host_threads
/// chunks of host_chunk), else once the slots' earlier uploads let the last chunks in, which waits for
/// the targets' ready events; the ring goes back to the pool behind the returned events.
std::vector<SharedEvent> upload_to_all(ManagerState& m, std::span<const std::byte> data,
                                       std::span<const DeviceRange> targets, UploadMode mode, bool pinned);

}  // namespace gpuxfer::detail
