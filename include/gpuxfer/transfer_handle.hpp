/// @file transfer_handle.hpp
/// @brief Completion handles of asynchronous transfers: event-based, no thread per operation.
#pragma once

#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

#include <gpuxfer/host_buffer.hpp>

namespace gpuxfer {

class InterGpuTransfer;

namespace detail {
struct OperationState;
}

/// Completion of a queued transfer. Move-only. Destroying a handle that was never waited on does not
/// block and loses nothing: the staging memory it holds returns to the pool only once the GPU is done.
/// ready(), wait(), stream_wait() and GatherHandle::get() may be called from several threads at once
/// (moving or destroying the handle may not).
class TransferHandle {
 public:
  /// A handle of nothing: ready at once.
  TransferHandle() noexcept;
  ~TransferHandle();
  TransferHandle(TransferHandle&&) noexcept;
  TransferHandle& operator=(TransferHandle&&) noexcept;
  TransferHandle(const TransferHandle&) = delete;
  TransferHandle& operator=(const TransferHandle&) = delete;

  /// True when every copy of the transfer has completed (or there was nothing to do). Never blocks.
  /// @throws Error(Errc::device_fault / Errc::cuda_error) when the transfer failed
  [[nodiscard]] bool ready() const;
  /// Blocks until the transfer has completed. @throws Error as ready() does
  void wait();
  /// Makes @p stream wait, on the GPU, for the transfer before its later work (no host wait): an
  /// asynchronous result chains into the caller's work. @throws Error(Errc::cuda_error) when CUDA refuses
  void stream_wait(cudaStream_t stream) const;

 protected:
  friend class InterGpuTransfer;  // the only maker of handles
  explicit TransferHandle(std::unique_ptr<detail::OperationState> state) noexcept;
  std::unique_ptr<detail::OperationState> state_;
};

/// Completion of InterGpuTransfer::gather: one HostBuffer per source device, ascending, the
/// destination skipped, empty where nothing was registered.
class GatherHandle : public TransferHandle {
 public:
  /// A handle of nothing: get() returns an empty vector.
  GatherHandle() noexcept = default;

  /// Waits, then hands the buffers over to the first call (of any thread); a later one returns an
  /// empty vector.
  /// @throws Error as wait() does
  [[nodiscard]] std::vector<HostBuffer> get();

 private:
  friend class InterGpuTransfer;
  explicit GatherHandle(std::unique_ptr<detail::OperationState> state) noexcept;
};

}  // namespace gpuxfer
