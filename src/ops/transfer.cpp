// InterGpuTransfer's construction and its registry: which buffer each device offers, and the stream
// that produces it.
#include <gpuxfer/inter_gpu_transfer.hpp>

#include <string>

#include <gpuxfer/error.hpp>

#include "engine/transfer_state.hpp"
#include "node/pointer_checks.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/stream.hpp"

namespace gpuxfer {

InterGpuTransfer::InterGpuTransfer(std::shared_ptr<MultiGpuManager> manager) : manager_(std::move(manager)) {
  if (!manager_) throw Error(Errc::invalid_argument, "InterGpuTransfer needs a manager, got nullptr");
  state_ = std::make_unique<detail::TransferState>(detail::ManagerState::of(*manager_));
}

InterGpuTransfer::~InterGpuTransfer() = default;

const std::shared_ptr<MultiGpuManager>& InterGpuTransfer::manager() const noexcept { return manager_; }

void InterGpuTransfer::set_device_buffer(std::size_t device_idx, void* ptr, std::size_t size_bytes) {
  set_device_buffer(device_idx, ptr, size_bytes, cudaStreamLegacy);
}

void InterGpuTransfer::set_device_buffer(std::size_t device_idx, void* ptr, std::size_t size_bytes,
                                         cudaStream_t producer) {
  detail::ManagerState& m = state_->m;
  detail::check_index(m, device_idx, "set_device_buffer device");
  detail::Registration reg;
  reg.allocation = detail::validate_device_range(m, device_idx, ptr, size_bytes, "set_device_buffer");
  reg.ptr = ptr;
  reg.size = size_bytes;
  if (producer != nullptr && producer != cudaStreamLegacy) {
    const int stream_ordinal =
        detail::caller_stream(producer, "set_device_buffer", "the producer stream").ordinal;
    if (stream_ordinal != m.ordinal(device_idx)) {
      throw Error(Errc::invalid_argument, "set_device_buffer: the producer stream belongs to ordinal " +
                                              std::to_string(stream_ordinal) + ", the buffer to " +
                                              detail::device_name(m, device_idx));
    }
  }
  reg.stream = producer;
  reg.order = std::make_shared<detail::BufferOrder>();
  state_->registry.set(device_idx, std::move(reg));
}

void InterGpuTransfer::clear_device_buffer(std::size_t device_idx) {
  detail::check_index(state_->m, device_idx, "clear_device_buffer device");
  state_->registry.clear(device_idx);
}

std::optional<RegisteredBuffer> InterGpuTransfer::device_buffer(std::size_t device_idx) const {
  detail::check_index(state_->m, device_idx, "device_buffer device");
  const auto reg = state_->registry.get(device_idx);
  if (!reg) return std::nullopt;
  return RegisteredBuffer{reg->ptr, reg->size};
}

}  // namespace gpuxfer
