/// @file inter_gpu_transfer.hpp
/// @brief InterGpuTransfer: gather, copy and broadcast the buffers registered on each device.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <cuda_runtime_api.h>

#include <gpuxfer/buffer_ranges.hpp>
#include <gpuxfer/host_buffer.hpp>
#include <gpuxfer/multi_gpu_manager.hpp>
#include <gpuxfer/transfer_handle.hpp>
#include <gpuxfer/transfer_paths.hpp>

namespace gpuxfer {

namespace detail {
struct TransferState;
}

/// Moves the buffers registered on each device between devices and the host. Thread-safe: several
/// threads may register, gather, copy and broadcast at once; each operation works on one consistent
/// snapshot of the registry taken when it starts.
///
/// Ordering, all of it on the GPU (no host waits):
///  - A registered buffer belongs to the stream that registered it (set_device_buffer's producer, the
///    legacy default stream when omitted). Every operation on the buffer first waits for the work queued
///    on that stream when the operation starts, and the stream waits for the operation's reads and
///    writes of the buffer before its later work: "compute, register, gather, compute again" on one
///    stream needs no synchronisation. The stream must outlive the registration.
///  - gpuxfer's own operations are ordered per buffer: one that writes a buffer waits for gpuxfer's last
///    write of it and for the reads in flight; one that reads it waits for the last write.
///  - Stream-ordered forms (the `_async` members taking a cudaStream_t, no default) also start after
///    everything already queued on that stream, and the stream waits for them before its later work;
///    they return once the work is queued. 0 or cudaStreamLegacy means the legacy default stream of each
///    device involved. Forms of pageable host memory cannot be captured; a download into it returns once
///    the bytes are there, an upload from it once host threads have staged every byte in pinned memory
///    (the caller's memory is free again then): without waiting for the stream when the bytes fit the
///    call's staging ring of 2 x Options::host_threads chunks of at most 4 MiB (at least 4; 64 MiB with
///    8 threads), else once the ring's earlier chunks have reached the device, which waits for the
///    stream's earlier work. The ring goes back to the pool behind the upload; at most two rings of one
///    size and one first target device stay pending: a further upload first waits for the oldest.
///  - CUDA graphs: while the given stream captures, operations on device memory, on pinned memory and
///    over NCCL are captured (nothing allocated, synchronised or queried; ordered with the capturing
///    stream alone, the graph's launches order with the rest); what needs the host or the pinned pool
///    throws Errc::unsupported saying why. CUDA does not tell a capturing stream's device: it must be
///    the calling thread's current device. Captured work goes on streams each open capture takes for
///    itself, never on those the manager's other operations share: several threads may capture at once,
///    and other operations may run meanwhile. A capture on another thread, in any mode (global included),
///    on a stream created with cudaStreamNonBlocking, neither hinders the operations, blocking or not,
///    nor is invalidated by them: the calls CUDA counts unsafe during one (allocations, registrations, event and
///    stream waits) are made with the thread relaxed. (While a blocking stream captures, CUDA refuses any
///    use of the legacy default stream, which operations given no stream order with.)
///  - Blocking forms are the same work plus a host wait. gather_to_device and gather_slices, whose
///    outputs or inputs are caller memory, order it with the legacy default stream, as cudaMemcpy does.
///  - A call that throws after it queued part of its work (a later device's staging out of pinned memory,
///    a failed copy) first waits for that part: once it has thrown, nothing of it touches the caller's
///    memory or the buffers. That wait includes what the caller's stream held before the call.
class InterGpuTransfer {
 public:
  /// @throws Error(Errc::invalid_argument) when @p manager is null
  explicit InterGpuTransfer(std::shared_ptr<MultiGpuManager> manager);
  ~InterGpuTransfer();
  InterGpuTransfer(const InterGpuTransfer&) = delete;
  InterGpuTransfer& operator=(const InterGpuTransfer&) = delete;

  /// The manager this engine uses.
  [[nodiscard]] const std::shared_ptr<MultiGpuManager>& manager() const noexcept;

  /// Registers the buffer produced on device @p device_idx: @p size_bytes bytes at device pointer @p ptr.
  /// The buffer then belongs to @p producer (the legacy default stream when omitted; it must be a stream
  /// of that device and outlive the registration): each later operation on the buffer waits for the work
  /// queued on @p producer when that operation starts, and @p producer's later work waits for the
  /// operation's reads and writes of the buffer. Replaces any earlier registration of the device; the same
  /// pointer registered again (over itself, or after a clear_device_buffer or another buffer's
  /// registration on the device) stays ordered after gpuxfer's work still in flight on it. cudaStreamPerThread
  /// keeps CUDA's meaning at each operation: the per-thread default stream, on the buffer's device, of the
  /// thread that makes the operation (as a caller's stream, that of the current device): register with it
  /// only what the threads that operate on the buffer produce on their own per-thread streams.
  /// @throws Error(Errc::invalid_argument) when @p producer belongs to another device
  /// @throws Error(Errc::invalid_buffer) when @p device_idx is out of range, @p ptr is null, a host or
  ///         unknown pointer, memory of another device, or @p size_bytes passes the end of its allocation
  void set_device_buffer(std::size_t device_idx, void* ptr, std::size_t size_bytes);
  void set_device_buffer(std::size_t device_idx, void* ptr, std::size_t size_bytes, cudaStream_t producer);

  /// Forgets the registration of @p device_idx. @throws Error(Errc::invalid_buffer) when out of range
  void clear_device_buffer(std::size_t device_idx);

  /// The registration of @p device_idx, if any. @throws Error(Errc::invalid_buffer) when out of range
  [[nodiscard]] std::optional<RegisteredBuffer> device_buffer(std::size_t device_idx) const;

  /// Writes host bytes @p data into the start of @p dst_device's registered buffer, through pinned
  /// staging (or directly when @p data is pinned). @p src_device is validated as in the seed API.
  /// Returns once the bytes are on the device.
  /// @throws Error(Errc::invalid_buffer) for an index out of range or no buffer on @p dst_device
  /// @throws Error(Errc::invalid_argument) when @p data is larger than the destination buffer
  void copy_buffer(std::size_t src_device, std::size_t dst_device, std::span<const std::byte> data);

  /// Stream-ordered copy_buffer: the bytes are on the device when @p stream gets past this point. From
  /// pinned memory it returns at once (@p data must stay unchanged until then); from pageable memory it
  /// returns once host threads have staged every byte (@p data is free again), which waits for
  /// @p stream's earlier work only when the bytes are larger than the staging ring (see above).
  void copy_buffer_async(std::size_t src_device, std::size_t dst_device, std::span<const std::byte> data,
                         cudaStream_t stream);

  /// Copies @p src_device's registered buffer into the start of @p dst_device's. Returns when done.
  /// @throws Error(Errc::invalid_buffer) for an index out of range or a missing buffer
  /// @throws Error(Errc::invalid_argument) when the source is larger than the destination, or src == dst
  /// @throws Error(Errc::unsupported) for CopyPath::peer without peer access
  void copy_device_buffer(std::size_t src_device, std::size_t dst_device, CopyPath path = CopyPath::automatic);
  /// As copy_device_buffer, returning at once. @throws as copy_device_buffer for bad input
  [[nodiscard]] TransferHandle copy_device_buffer_async(std::size_t src_device, std::size_t dst_device,
                                                        CopyPath path = CopyPath::automatic);
  /// Stream-ordered copy_device_buffer: after @p stream's earlier work, before its later work. The
  /// handle also completes with the copy. Capturable over CopyPath::peer (automatic with peer access).
  TransferHandle copy_device_buffer_async(std::size_t src_device, std::size_t dst_device, cudaStream_t stream,
                                          CopyPath path = CopyPath::automatic);

  /// Writes host bytes @p data into the start of every device's registered buffer, device 0 included.
  /// Every device must have a buffer of at least data.size() bytes. Returns when every device has them.
  /// @throws Error(Errc::invalid_buffer) naming the first device without a buffer
  /// @throws Error(Errc::invalid_argument) naming the first device whose buffer is too small
  void broadcast(std::span<const std::byte> data, HostBroadcastPath path = HostBroadcastPath::automatic);
  /// Stream-ordered broadcast: every device has the bytes when @p stream gets past this point. From
  /// pinned memory it returns at once (@p data must stay unchanged until then) and can be captured;
  /// from pageable memory it returns once host threads have staged every byte, as copy_buffer_async.
  void broadcast_async(std::span<const std::byte> data, cudaStream_t stream,
                       HostBroadcastPath path = HostBroadcastPath::automatic);
  /// broadcast_async with one stream per device (@p streams[i] of device i, as many as devices; null is
  /// the legacy default stream): device i is written after @p streams[i]'s earlier work, and each of the
  /// streams (a broadcast writes every device) waits for the whole broadcast.
  /// @throws Error(Errc::invalid_argument) for a wrong count or a stream of another device
  void broadcast_async(std::span<const std::byte> data, std::span<const cudaStream_t> streams,
                       HostBroadcastPath path = HostBroadcastPath::automatic);

  /// Copies @p root's registered buffer into the start of every other device's. Returns when done.
  /// @throws Error(Errc::invalid_buffer / invalid_argument) as broadcast; Errc::unsupported for
  ///         DeviceBroadcastPath::nccl without NCCL; Errc::nccl_error when NCCL fails
  void broadcast_from_device(std::size_t root, DeviceBroadcastPath path = DeviceBroadcastPath::automatic);
  /// Stream-ordered broadcast_from_device; capturable over NCCL and peer copies.
  void broadcast_from_device_async(std::size_t root, cudaStream_t stream,
                                   DeviceBroadcastPath path = DeviceBroadcastPath::automatic);

  /// Queues a readback of every registered buffer except @p dst_device's and returns at once. All
  /// sources are in flight together on their own streams.
  /// @throws Error(Errc::invalid_buffer) when @p dst_device is out of range or a buffer was freed
  /// @throws Error(Errc::out_of_memory) when the pinned pool cannot hold the results
  [[nodiscard]] GatherHandle gather(std::size_t dst_device);
  /// Stream-ordered gather: the results are written when @p stream gets past this point (the handle
  /// also completes then). Not capturable (the results are leased at each call): capture
  /// gather_into_async into pinned memory.
  [[nodiscard]] GatherHandle gather_async(std::size_t dst_device, cudaStream_t stream);
  /// gather_async with one stream per device (@p streams[i] of device i, as many as devices; null is the
  /// legacy default stream): device i's read starts after @p streams[i]'s earlier work, and every stream
  /// of the list waits for the whole gather, @p dst_device's and those of devices with nothing
  /// registered too (their earlier work is not waited for: nothing of theirs is read).
  /// @throws Error(Errc::invalid_argument) for a wrong count or a stream of another device
  [[nodiscard]] GatherHandle gather_async(std::size_t dst_device, std::span<const cudaStream_t> streams);

  /// gather(dst_device).get(): one pinned HostBuffer per source device, ascending, @p dst_device
  /// skipped, empty where nothing was registered.
  [[nodiscard]] std::vector<HostBuffer> gather_blocking(std::size_t dst_device);

  /// Every device's buffer to the host, nothing skipped: entry i belongs to device i.
  [[nodiscard]] std::vector<HostBuffer> gather_all();
  /// Stream-ordered gather_all, as gather_async.
  [[nodiscard]] GatherHandle gather_all_async(cudaStream_t stream);
  /// gather_all_async with one stream per device, as gather_async.
  [[nodiscard]] GatherHandle gather_all_async(std::span<const cudaStream_t> streams);

  /// Concatenates the registered buffers of every device (ascending; @p skip_device left out when set)
  /// into caller memory @p out, pinned or pageable. Pageable memory is filled through pinned chunks
  /// copied by several threads, overlapped with the DMA. Returns where each device's bytes landed.
  /// @throws Error(Errc::invalid_argument) when @p out is smaller than the sum of the buffers
  std::vector<GatherPiece> gather_into(std::span<std::byte> out,
                                       std::optional<std::size_t> skip_device = std::nullopt);
  /// Stream-ordered gather_into: into pinned or registered memory it returns at once, the bytes there
  /// when @p stream gets past this point, and can be captured; into pageable memory it returns once the
  /// bytes are there.
  std::vector<GatherPiece> gather_into_async(std::span<std::byte> out, cudaStream_t stream,
                                             std::optional<std::size_t> skip_device = std::nullopt);
  /// gather_into_async with one stream per device, as gather_async.
  std::vector<GatherPiece> gather_into_async(std::span<std::byte> out, std::span<const cudaStream_t> streams,
                                             std::optional<std::size_t> skip_device = std::nullopt);

  /// Gathers many (typically small) device ranges into host memory @p out, packed back to back in the
  /// order given. Per device the slices are packed on the GPU by one kernel and downloaded with one
  /// copy, so a thousand 4 KiB pieces cost about what one copy does. The slices are caller memory: the
  /// copies start after the work queued on each device's legacy default stream (gather_slices_async:
  /// on the given stream). Returns the bytes written (the sum of the slice sizes).
  /// @throws Error(Errc::invalid_buffer) for a device index out of range or a slice that is not memory of
  ///         its device; Error(Errc::invalid_argument) when @p out is too small
  std::size_t gather_slices(std::span<const DeviceSlice> slices, std::span<std::byte> out);
  /// Stream-ordered gather_slices: into pinned memory it returns at once, the bytes there when @p stream
  /// gets past this point; into pageable memory it returns once they are there. Not capturable.
  std::size_t gather_slices_async(std::span<const DeviceSlice> slices, std::span<std::byte> out, cudaStream_t stream);

  /// Concatenates every device's registered buffer, @p dst_device's own included, ascending, into
  /// device memory @p out of @p capacity bytes on @p dst_device, over peer links where enabled. Writes
  /// @p out after the work queued on the legacy default stream, as cudaMemcpy would.
  /// @throws Error(Errc::invalid_buffer) when @p out is not memory of @p dst_device
  /// @throws Error(Errc::invalid_argument) when @p capacity is smaller than the sum of the buffers
  std::vector<GatherPiece> gather_to_device(std::size_t dst_device, void* out, std::size_t capacity);
  /// Stream-ordered gather_to_device: @p out is written after @p stream's earlier work and complete when
  /// @p stream gets past this point. Capturable when every source has peer access to @p dst_device.
  std::vector<GatherPiece> gather_to_device_async(std::size_t dst_device, void* out, std::size_t capacity,
                                                  cudaStream_t stream);

 private:
  std::shared_ptr<MultiGpuManager> manager_;
  std::unique_ptr<detail::TransferState> state_;
};

}  // namespace gpuxfer
