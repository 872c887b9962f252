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
/// Ordering: set_device_buffer records an event on the producer's stream; every later operation that
/// reads or writes that buffer waits for it on the GPU. Blocking operations return once their data has
/// arrived; the caller's own streams see it without further synchronisation.
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
  /// Later operations wait for the work queued on @p producer (the legacy default stream when omitted)
  /// at the time of this call. Replaces any earlier registration of the device.
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

  /// Copies @p src_device's registered buffer into the start of @p dst_device's. Returns when done.
  /// @throws Error(Errc::invalid_buffer) for an index out of range or a missing buffer
  /// @throws Error(Errc::invalid_argument) when the source is larger than the destination, or src == dst
  /// @throws Error(Errc::unsupported) for CopyPath::peer without peer access
  void copy_device_buffer(std::size_t src_device, std::size_t dst_device, CopyPath path = CopyPath::automatic);
  /// As copy_device_buffer, returning at once. @throws as copy_device_buffer for bad input
  [[nodiscard]] TransferHandle copy_device_buffer_async(std::size_t src_device, std::size_t dst_device,
                                                        CopyPath path = CopyPath::automatic);

  /// Writes host bytes @p data into the start of every device's registered buffer, device 0 included.
  /// Every device must have a buffer of at least data.size() bytes. Returns when every device has them.
  /// @throws Error(Errc::invalid_buffer) naming the first device without a buffer
  /// @throws Error(Errc::invalid_argument) naming the first device whose buffer is too small
  void broadcast(std::span<const std::byte> data, HostBroadcastPath path = HostBroadcastPath::automatic);

  /// Copies @p root's registered buffer into the start of every other device's. Returns when done.
  /// @throws Error(Errc::invalid_buffer / invalid_argument) as broadcast; Errc::unsupported for
  ///         DeviceBroadcastPath::nccl without NCCL; Errc::nccl_error when NCCL fails
  void broadcast_from_device(std::size_t root, DeviceBroadcastPath path = DeviceBroadcastPath::automatic);

  /// Queues a readback of every registered buffer except @p dst_device's and returns at once. All
  /// sources are in flight together on their own streams.
  /// @throws Error(Errc::invalid_buffer) when @p dst_device is out of range or a buffer was freed
  /// @throws Error(Errc::out_of_memory) when the pinned pool cannot hold the results
  [[nodiscard]] GatherHandle gather(std::size_t dst_device);

  /// gather(dst_device).get(): one pinned HostBuffer per source device, ascending, @p dst_device
  /// skipped, empty where nothing was registered.
  [[nodiscard]] std::vector<HostBuffer> gather_blocking(std::size_t dst_device);

  /// Every device's buffer to the host, nothing skipped: entry i belongs to device i.
  [[nodiscard]] std::vector<HostBuffer> gather_all();

  /// Concatenates the registered buffers of every device (ascending; @p skip_device left out when set)
  /// into caller memory @p out, pinned or pageable. Pageable memory is filled through pinned chunks
  /// copied by several threads, overlapped with the DMA. Returns where each device's bytes landed.
  /// @throws Error(Errc::invalid_argument) when @p out is smaller than the sum of the buffers
  std::vector<GatherPiece> gather_into(std::span<std::byte> out,
                                       std::optional<std::size_t> skip_device = std::nullopt);

  /// Gathers many (typically small) device ranges into host memory @p out, packed back to back in the
  /// order given. Per device the slices are packed on the GPU by one kernel and downloaded with one
  /// copy, so a thousand 4 KiB pieces cost about what one copy does. Waits for nothing registered: the
  /// caller orders the slices' producers (for example with cudaDeviceSynchronize or its own events).
  /// Returns the bytes written (the sum of the slice sizes).
  /// @throws Error(Errc::invalid_buffer) for a device index out of range or a slice that is not memory of
  ///         its device; Error(Errc::invalid_argument) when @p out is too small
  std::size_t gather_slices(std::span<const DeviceSlice> slices, std::span<std::byte> out);

  /// Concatenates every device's registered buffer, @p dst_device's own included, ascending, into
  /// device memory @p out of @p capacity bytes on @p dst_device, over peer links where enabled.
  /// @throws Error(Errc::invalid_buffer) when @p out is not memory of @p dst_device
  /// @throws Error(Errc::invalid_argument) when @p capacity is smaller than the sum of the buffers
  std::vector<GatherPiece> gather_to_device(std::size_t dst_device, void* out, std::size_t capacity);

 private:
  std::shared_ptr<MultiGpuManager> manager_;
  std::unique_ptr<detail::TransferState> state_;
};

}  // namespace gpuxfer
