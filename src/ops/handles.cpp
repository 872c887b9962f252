#include <gpuxfer/transfer_handle.hpp>

#include <string>

#include "engine/operation_state.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/stream.hpp"

namespace gpuxfer {

TransferHandle::TransferHandle() noexcept = default;
TransferHandle::TransferHandle(std::unique_ptr<detail::OperationState> state) noexcept
    : state_(std::move(state)) {}
TransferHandle::~TransferHandle() = default;
TransferHandle::TransferHandle(TransferHandle&&) noexcept = default;
TransferHandle& TransferHandle::operator=(TransferHandle&&) noexcept = default;

bool TransferHandle::ready() const { return !state_ || state_->query(); }

void TransferHandle::wait() {
  if (state_) state_->wait();
}

void TransferHandle::stream_wait(cudaStream_t stream) const {
  if (!state_ || state_->finished) return;
  const detail::CallerStreamContext context(stream);  // a thread without a context is left without one
  for (const auto& [event, device] : state_->events) {
    GPUXFER_CUDA_TRY_CTX(cudaStreamWaitEvent(stream, event->get(), 0),
                         "making a stream wait for " + state_->what + " on " + device);
  }
}

GatherHandle::GatherHandle(std::unique_ptr<detail::OperationState> state) noexcept
    : TransferHandle(std::move(state)) {}

std::vector<HostBuffer> GatherHandle::get() {
  if (!state_) return {};
  return state_->take_results();
}

}  // namespace gpuxfer
