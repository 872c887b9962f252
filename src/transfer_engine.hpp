// The transfer engine's building blocks: copies queued on the manager's streams, each waiting for the
// events its inputs depend on and recording the events its outputs are ready at. The public operations
// in inter_gpu_transfer.cpp, gather.cpp and broadcast.cpp are put together from these.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "buffer_registry.hpp"
#include "completion.hpp"
#include "manager_impl.hpp"

namespace gpuxfer::detail {

/// The engine behind one InterGpuTransfer.
struct TransferImpl {
  explicit TransferImpl(ManagerImpl& manager) : m(manager), registry(manager.size()) {}
  ManagerImpl& m;
  BufferRegistry registry;
};

/// A byte range in one device's memory, with the event after which it may be touched.
struct DeviceRange {
  std::size_t device = 0;
  std::byte* ptr = nullptr;
  std::size_t size = 0;
  SharedEvent ready;
};

/// The range of a registration (re-checked against a free since it was registered).
[[nodiscard]] DeviceRange range_of(const ManagerImpl& m, std::size_t device, const Registration& reg);

/// True when @p ptr is page-locked host memory (cudaHostAlloc or cudaHostRegister).
[[nodiscard]] bool is_pinned(const void* ptr) noexcept;

/// Queues @p src -> pinned @p host on src's download stream. Returns the event after which it is done.
SharedEvent enqueue_download(ManagerImpl& m, const DeviceRange& src, std::byte* host);

/// Queues a peer copy src -> dst (both ranges' ready events waited for) on @p stream_owner's peer
/// stream. The two devices must have peer access, or be the same device.
SharedEvent enqueue_peer_copy(ManagerImpl& m, const DeviceRange& src, const DeviceRange& dst,
                              std::size_t stream_owner);

/// Queues a copy src -> dst through a ring of pooled pinned chunks: the download of chunk k+1 overlaps
/// the upload of chunk k, entirely on the GPU side (no host thread waits). The chunks are held by
/// @p done until the returned event has completed. @throws Error(Errc::out_of_memory) for the chunks
SharedEvent enqueue_staged_copy(ManagerImpl& m, const DeviceRange& src, const DeviceRange& dst, Completion& done);

/// Device-to-device copy by the best path: local or peer (on @p stream_owner's peer stream) when
/// possible, else staged.
SharedEvent enqueue_device_copy(ManagerImpl& m, const DeviceRange& src, const DeviceRange& dst,
                                std::size_t stream_owner, Completion& done);

/// Downloads every range in @p sources into pageable @p outs (same order, each outs[i] the size of
/// sources[i]) through pinned chunks; host threads copy chunk k out while chunk k+1 is in flight. Blocks
/// until done.
void download_pageable(ManagerImpl& m, std::span<const DeviceRange> sources, std::span<std::byte* const> outs);

/// How a host buffer reaches several devices.
enum class UploadMode { per_device, scatter_allgather };

/// Writes @p data into every range of @p targets (each at least data.size() bytes). Pinned data is
/// uploaded in place; pageable data goes through pinned chunks filled by host threads. Blocks until
/// every target holds the bytes.
void upload_to_all(ManagerImpl& m, std::span<const std::byte> data, std::span<const DeviceRange> targets,
                   UploadMode mode);

}  // namespace gpuxfer::detail
