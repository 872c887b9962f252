// Device buffers to host memory: straight into pinned memory, or through a StagingRing into pageable memory.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "engine/device_range.hpp"
#include "node/manager_state.hpp"

namespace gpuxfer::detail {

/// Queues @p src -> pinned @p host on src's d2h stream. Returns the event after which it is done.
SharedEvent enqueue_download(ManagerState& m, const DeviceRange& src, std::byte* host);

/// Downloads every range in @p sources into pageable @p outs (same order, each outs[i] the size of
/// sources[i]), one StagingRing per source (host_pipeline.hpp): this thread queues the chunks' copies
/// into free slots, round-robin over the sources so every link stays busy, while each source's host copy
/// workers copy landed chunks out, a chunk per worker. A source of one chunk is copied out by this thread
/// with every worker. Blocks until done; returns, per source, an event of its stream recorded after its
/// last copy.
std::vector<SharedEvent> download_pageable(ManagerState& m, std::span<const DeviceRange> sources,
                                           std::span<std::byte* const> outs);

}  // namespace gpuxfer::detail
