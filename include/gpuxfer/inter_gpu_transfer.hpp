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

/// @brief Moves the buffers registered on each device between devices and the host.
///
/// Thread-safe: each operation works on a snapshot of the registry taken when it starts. Every
/// operation comes in a blocking form and a stream-ordered `_async` form (a cudaStream_t, no default).
/// A registered buffer belongs to its producer stream: operations wait for that stream's work and the
/// stream waits for them, all on the GPU. The ordering model (streams, pageable memory, CUDA graphs,
/// failures part-way) is in docs/ORDERING.md.
class InterGpuTransfer {
 public:
  /// @brief An engine over @p manager's devices.
  /// @throws Error(Errc::invalid_argument) when @p manager is null
  explicit InterGpuTransfer(std::shared_ptr<MultiGpuManager> manager);
  /// @brief Ends the engine (the registrations with it). Never throws.
  ~InterGpuTransfer();
  InterGpuTransfer(const InterGpuTransfer&) = delete;
  InterGpuTransfer& operator=(const InterGpuTransfer&) = delete;

  /// @brief The manager this engine uses.
  [[nodiscard]] const std::shared_ptr<MultiGpuManager>& manager() const noexcept;

  /// @brief Registers @p size_bytes bytes at device pointer @p ptr as device @p device_idx's buffer.
  /// @param device_idx index into the manager's devices
  /// @param ptr device memory of that device
  /// @param size_bytes bytes, within @p ptr's allocation
  /// @param producer stream of that device that owns the buffer (the legacy default stream when omitted);
  ///        it must outlive the registration
  /// @throws Error(Errc::invalid_argument) when @p producer belongs to another device
  /// @throws Error(Errc::invalid_buffer) when @p device_idx is out of range, @p ptr is null, a host or
  ///         unknown pointer, memory of another device, or @p size_bytes passes the end of its allocation
  /// @note Replaces the device's earlier registration. cudaStreamPerThread means the per-thread stream of
  ///       the thread that makes each operation (docs/ORDERING.md, "Producer streams").
  void set_device_buffer(std::size_t device_idx, void* ptr, std::size_t size_bytes);
  void set_device_buffer(std::size_t device_idx, void* ptr, std::size_t size_bytes, cudaStream_t producer);

  /// @brief Forgets device @p device_idx's registration.
  /// @throws Error(Errc::invalid_buffer) when @p device_idx is out of range
  void clear_device_buffer(std::size_t device_idx);

  /// @brief Device @p device_idx's registration, if any.
  /// @throws Error(Errc::invalid_buffer) when @p device_idx is out of range
  [[nodiscard]] std::optional<RegisteredBuffer> device_buffer(std::size_t device_idx) const;

  /// @brief Writes host bytes @p data into the start of @p dst_device's registered buffer.
  /// @param src_device device whose index is validated with the destination's
  /// @param dst_device device whose buffer receives the bytes
  /// @param data pinned or pageable host memory (pageable goes through pinned staging)
  /// @throws Error(Errc::invalid_buffer) for an index out of range or no buffer on @p dst_device
  /// @throws Error(Errc::invalid_argument) when @p data is larger than the destination buffer
  /// @note Returns once the bytes are on the device.
  void copy_buffer(std::size_t src_device, std::size_t dst_device, std::span<const std::byte> data);

  /// @brief Stream-ordered copy_buffer: the bytes are on the device when @p stream gets past it.
  /// @throws as copy_buffer
  /// @note From pinned memory it returns at once (@p data unchanged until @p stream gets past it); from
  ///       pageable memory once host threads have staged every byte (docs/ORDERING.md, "Pageable memory").
  void copy_buffer_async(std::size_t src_device, std::size_t dst_device, std::span<const std::byte> data,
                         cudaStream_t stream);

  /// @brief Copies @p src_device's registered buffer into the start of @p dst_device's.
  /// @param path CopyPath::automatic (peer when enabled, else staged), ::peer or ::staged
  /// @throws Error(Errc::invalid_buffer) for an index out of range or a missing buffer
  /// @throws Error(Errc::invalid_argument) when the source is larger than the destination, or src == dst
  /// @throws Error(Errc::unsupported) for CopyPath::peer without peer access
  /// @note Returns when done.
  void copy_device_buffer(std::size_t src_device, std::size_t dst_device, CopyPath path = CopyPath::automatic);
  /// @brief As copy_device_buffer, returning at once; the handle completes with the copy.
  /// @throws as copy_device_buffer
  [[nodiscard]] TransferHandle copy_device_buffer_async(std::size_t src_device, std::size_t dst_device,
                                                        CopyPath path = CopyPath::automatic);
  /// @brief Stream-ordered copy_device_buffer: after @p stream's earlier work, before its later work.
  /// @throws as copy_device_buffer
  /// @note Capturable over CopyPath::peer (automatic with peer access). The handle completes with the copy.
  TransferHandle copy_device_buffer_async(std::size_t src_device, std::size_t dst_device, cudaStream_t stream,
                                          CopyPath path = CopyPath::automatic);

  /// @brief Writes host bytes @p data into the start of every device's registered buffer.
  /// @param path HostBroadcastPath::automatic, ::per_device or ::scatter_allgather
  /// @throws Error(Errc::invalid_buffer) naming the first device without a buffer
  /// @throws Error(Errc::invalid_argument) naming the first device whose buffer is too small
  /// @note Returns when every device has the bytes.
  void broadcast(std::span<const std::byte> data, HostBroadcastPath path = HostBroadcastPath::automatic);
  /// @brief Stream-ordered broadcast: every device has the bytes when @p stream gets past it.
  /// @throws as broadcast
  /// @note From pinned memory it returns at once and can be captured; from pageable memory as
  ///       copy_buffer_async.
  void broadcast_async(std::span<const std::byte> data, cudaStream_t stream,
                       HostBroadcastPath path = HostBroadcastPath::automatic);
  /// @brief broadcast_async with one stream per device (@p streams[i] of device i; null: legacy default).
  /// @throws Error(Errc::invalid_argument) for a wrong count or a stream of another device; as broadcast
  /// @note Device i is written after @p streams[i]'s earlier work; every stream waits for the whole broadcast.
  void broadcast_async(std::span<const std::byte> data, std::span<const cudaStream_t> streams,
                       HostBroadcastPath path = HostBroadcastPath::automatic);

  /// @brief Copies @p root's registered buffer into the start of every other device's.
  /// @param path DeviceBroadcastPath::automatic (NCCL when available), ::nccl or ::peer
  /// @throws Error(Errc::invalid_buffer / invalid_argument) as broadcast
  /// @throws Error(Errc::unsupported) for DeviceBroadcastPath::nccl without NCCL
  /// @throws Error(Errc::nccl_error) when NCCL fails
  /// @note Returns when done.
  void broadcast_from_device(std::size_t root, DeviceBroadcastPath path = DeviceBroadcastPath::automatic);
  /// @brief Stream-ordered broadcast_from_device.
  /// @throws as broadcast_from_device
  /// @note Capturable over NCCL and peer copies.
  void broadcast_from_device_async(std::size_t root, cudaStream_t stream,
                                   DeviceBroadcastPath path = DeviceBroadcastPath::automatic);

  /// @brief Queues a readback of every registered buffer but @p dst_device's and returns at once.
  /// @throws Error(Errc::invalid_buffer) when @p dst_device is out of range or a buffer was freed
  /// @throws Error(Errc::out_of_memory) when the pinned pool cannot hold the results
  /// @note All sources are in flight together on their own streams; the handle's get() gives the results.
  [[nodiscard]] GatherHandle gather(std::size_t dst_device);
  /// @brief Stream-ordered gather: the results are written when @p stream gets past it.
  /// @throws as gather
  /// @note Not capturable (results are leased at each call): capture gather_into_async into pinned memory.
  [[nodiscard]] GatherHandle gather_async(std::size_t dst_device, cudaStream_t stream);
  /// @brief gather_async with one stream per device (@p streams[i] of device i; null: legacy default).
  /// @throws Error(Errc::invalid_argument) for a wrong count or a stream of another device; as gather
  /// @note Device i is read after @p streams[i]'s earlier work; every stream waits for the whole gather.
  [[nodiscard]] GatherHandle gather_async(std::size_t dst_device, std::span<const cudaStream_t> streams);

  /// @brief gather(dst_device).get(): one pinned HostBuffer per device, ascending.
  /// @throws as gather
  /// @note @p dst_device's entry and those of devices with nothing registered are empty.
  [[nodiscard]] std::vector<HostBuffer> gather_blocking(std::size_t dst_device);

  /// @brief Every device's buffer to the host, nothing skipped: entry i belongs to device i.
  /// @throws Error(Errc::invalid_buffer) when a buffer was freed; Error(Errc::out_of_memory) as gather
  [[nodiscard]] std::vector<HostBuffer> gather_all();
  /// @brief Stream-ordered gather_all, as gather_async.
  [[nodiscard]] GatherHandle gather_all_async(cudaStream_t stream);
  /// @brief gather_all_async with one stream per device, as gather_async.
  [[nodiscard]] GatherHandle gather_all_async(std::span<const cudaStream_t> streams);

  /// @brief Concatenates every device's registered buffer, ascending, into caller memory @p out.
  /// @param out pinned or pageable host memory (pageable is filled through pinned chunks by host threads)
  /// @param skip_device a device left out, if set
  /// @return where each device's bytes landed
  /// @throws Error(Errc::invalid_argument) when @p out is smaller than the sum of the buffers
  std::vector<GatherPiece> gather_into(std::span<std::byte> out,
                                       std::optional<std::size_t> skip_device = std::nullopt);
  /// @brief Stream-ordered gather_into.
  /// @throws as gather_into
  /// @note Into pinned or registered memory it returns at once, the bytes there when @p stream gets past
  ///       it, and can be captured; into pageable memory it returns once the bytes are there.
  std::vector<GatherPiece> gather_into_async(std::span<std::byte> out, cudaStream_t stream,
                                             std::optional<std::size_t> skip_device = std::nullopt);
  /// @brief gather_into_async with one stream per device, as gather_async.
  std::vector<GatherPiece> gather_into_async(std::span<std::byte> out, std::span<const cudaStream_t> streams,
                                             std::optional<std::size_t> skip_device = std::nullopt);

  /// @brief Gathers many (typically small) device ranges into host memory @p out, back to back.
  /// @param slices caller device memory: (device index, pointer, bytes), in output order
  /// @return the bytes written (the sum of the slice sizes)
  /// @throws Error(Errc::invalid_buffer) for a device index out of range or a slice that is not memory of
  ///         its device
  /// @throws Error(Errc::invalid_argument) when @p out is too small
  /// @note One kernel packs each device's slices and one copy downloads them: a thousand 4 KiB pieces cost
  ///       about one copy. Ordered after each device's legacy default stream, as cudaMemcpy is.
  std::size_t gather_slices(std::span<const DeviceSlice> slices, std::span<std::byte> out);
  /// @brief Stream-ordered gather_slices.
  /// @throws as gather_slices
  /// @note Into pinned memory it returns at once, the bytes there when @p stream gets past it; into
  ///       pageable memory once they are there. Not capturable.
  std::size_t gather_slices_async(std::span<const DeviceSlice> slices, std::span<std::byte> out, cudaStream_t stream);

  /// @brief Concatenates every device's registered buffer, @p dst_device's included, into device memory.
  /// @param out device memory of @p dst_device, @p capacity bytes
  /// @return where each device's bytes landed
  /// @throws Error(Errc::invalid_buffer) when @p out is not memory of @p dst_device
  /// @throws Error(Errc::invalid_argument) when @p capacity is smaller than the sum of the buffers
  /// @note Over peer links where enabled; writes @p out after the legacy default stream's work.
  std::vector<GatherPiece> gather_to_device(std::size_t dst_device, void* out, std::size_t capacity);
  /// @brief Stream-ordered gather_to_device: @p out is complete when @p stream gets past it.
  /// @throws as gather_to_device
  /// @note Capturable when every source has peer access to @p dst_device.
  std::vector<GatherPiece> gather_to_device_async(std::size_t dst_device, void* out, std::size_t capacity,
                                                  cudaStream_t stream);

 private:
  std::shared_ptr<MultiGpuManager> manager_;
  std::unique_ptr<detail::TransferState> state_;
};

}  // namespace gpuxfer
