#include <gpuxfer/transfer_handle.hpp>

#include "completion.hpp"
#include "cuda_check.hpp"
#include "pool_state.hpp"

namespace gpuxfer {
namespace detail {

Completion::~Completion() {
  // Never block here: what the GPU may still touch returns to the pool after its event.
  for (auto& [buffer, event] : staging) release_after(std::move(buffer), finished ? nullptr : event);
  for (std::size_t i = 0; i < results.size(); ++i) {
    release_after(std::move(results[i]), finished ? nullptr : result_events[i]);
  }
}

void Completion::track(SharedEvent event, std::string device) { events.emplace_back(std::move(event), std::move(device)); }

void Completion::hold(HostBuffer buffer, SharedEvent last_use) {
  staging.emplace_back(std::move(buffer), std::move(last_use));
}

void Completion::add_result(HostBuffer buffer, SharedEvent written) {
  results.push_back(std::move(buffer));
  result_events.push_back(std::move(written));
}

bool Completion::query() {
  if (finished) return true;
  for (const auto& [event, device] : events) {
    const cudaError_t status = cudaEventQuery(event->get());
    if (status == cudaErrorNotReady) return false;
    GPUXFER_CUDA_TRY_CTX(status, what + " on " + device);
  }
  return true;
}

void Completion::wait() {
  if (finished) return;
  for (const auto& [event, device] : events) {
    GPUXFER_CUDA_TRY_CTX(cudaEventSynchronize(event->get()), what + " on " + device);
  }
  finished = true;
  for (auto& [buffer, event] : staging) buffer.reset();
  staging.clear();
}

}  // namespace detail

TransferHandle::TransferHandle() noexcept = default;
TransferHandle::TransferHandle(std::unique_ptr<detail::Completion> completion) noexcept
    : completion_(std::move(completion)) {}
TransferHandle::~TransferHandle() = default;
TransferHandle::TransferHandle(TransferHandle&&) noexcept = default;
TransferHandle& TransferHandle::operator=(TransferHandle&&) noexcept = default;

bool TransferHandle::ready() const { return !completion_ || completion_->query(); }

void TransferHandle::wait() {
  if (completion_) completion_->wait();
}

GatherHandle::GatherHandle(std::unique_ptr<detail::Completion> completion) noexcept
    : TransferHandle(std::move(completion)) {}

std::vector<HostBuffer> GatherHandle::get() {
  if (!completion_) return {};
  completion_->wait();
  std::vector<HostBuffer> out = std::move(completion_->results);
  completion_->results.clear();
  completion_->result_events.clear();
  return out;
}

}  // namespace gpuxfer
