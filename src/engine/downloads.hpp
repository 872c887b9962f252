// Device buffers to host memory: straight into pinned memory, or through a StagingRing into pageable memory.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "engine/device_range.hpp"
#include "node/manager_state.hpp"

namespace gpuxfer::detail {

/// How a download is queued: on a stream that runs it, or into a CUDA graph that a stream captures.
enum class Queued { run, captured };

/// Queues @p src -> pinned @p host on src's d2h stream. Returns the event after which it is done. Captured,
/// a copy of at most captured_kernel_copy_max bytes between 16-byte aligned addresses, into memory the
/// device maps at its own address, becomes a kernel node: a
/// graph replays one sooner than a memcpy node (from launch to stream synchronised on an H200, 4 KiB: 7.11
/// against 7.50 us, 64 KiB: 8.66 against 8.93 us; gpuxfer-probe-graph-nodes measures it).
SharedEvent enqueue_download(ManagerState& m, const DeviceRange& src, std::byte* host,
                             Queued queued = Queued::run);

/// The largest captured download made a kernel node (enqueue_download).
inline constexpr std::size_t captured_kernel_copy_max = std::size_t{64} << 10;

/// Downloads every range in @p sources into pageable @p outs (same order, each outs[i] the size of
/// sources[i]), one StagingRing per source (host_pipeline.hpp): this thread queues the chunks' copies
/// into free slots, round-robin over the sources so every link stays busy, while each source's host copy
/// workers copy landed chunks out, a chunk per worker. A source of one chunk is copied out by this thread
/// with every worker. Blocks until done; returns, per source, an event of its stream recorded after its
/// last copy.
std::vector<SharedEvent> download_pageable(ManagerState& m, std::span<const DeviceRange> sources,
                                           std::span<std::byte* const> outs);

}  // namespace gpuxfer::detail
