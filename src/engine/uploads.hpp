// Host bytes to one or several devices: in place from pinned memory, through a ChunkRing filled by host
// threads from pageable memory.
#pragma once

#include <cstddef>
#include <span>

#include "engine/device_range.hpp"
#include "node/manager_state.hpp"

namespace gpuxfer::detail {

/// How a host buffer reaches several devices.
enum class UploadMode {
  per_device,         // every device loads everything over its own host link
  scatter_allgather,  // every device loads a share and forwards it to the others over peer links
};

/// Writes @p data into every range of @p targets (each at least data.size() bytes). Blocks until every
/// target holds the bytes.
void upload_to_all(ManagerState& m, std::span<const std::byte> data, std::span<const DeviceRange> targets,
                   UploadMode mode);

}  // namespace gpuxfer::detail
