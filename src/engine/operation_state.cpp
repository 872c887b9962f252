#include "engine/operation_state.hpp"

#include "memory/pool_state.hpp"
#include "runtime/cuda_check.hpp"

namespace gpuxfer::detail {

OperationState::~OperationState() {
  // Never block here: what the GPU may still touch returns to the pool after its event.
  for (auto& [buffer, event] : staging) release_after(std::move(buffer), finished ? nullptr : event);
  for (std::size_t i = 0; i < results.size(); ++i) {
    release_after(std::move(results[i]), finished ? nullptr : result_events[i]);
  }
}

void OperationState::track(SharedEvent event, std::string device) { events.emplace_back(std::move(event), std::move(device)); }

void OperationState::hold(HostBuffer buffer, SharedEvent last_use) {
  staging.emplace_back(std::move(buffer), std::move(last_use));
}

void OperationState::add_result(HostBuffer buffer, SharedEvent written) {
  results.push_back(std::move(buffer));
  result_events.push_back(std::move(written));
}

bool OperationState::query() {
  if (finished) return true;
  for (const auto& [event, device] : events) {
    const cudaError_t status = event->query();
    if (status == cudaErrorNotReady) return false;
    GPUXFER_CUDA_TRY_CTX(status, what + " on " + device);
  }
  return true;
}

void OperationState::wait() {
  if (finished) return;
  // A second thread waits here for the first to finish, then finds it finished.
  std::lock_guard lock(mutex_);
  if (finished) return;
  // Every event first, the first failure after: the other devices' copies into staging or caller memory
  // must be done before the exception hands that memory back.
  cudaError_t first = cudaSuccess;
  const std::string* failed = nullptr;
  for (const auto& [event, device] : events) {
    const cudaError_t status = event->synchronize();
    if (status != cudaSuccess && failed == nullptr) {
      first = status;
      failed = &device;
    }
  }
  if (failed != nullptr)
    throw_cuda(first, "event->synchronize()", __FILE__, __LINE__, what + " on " + *failed);
  for (auto& [buffer, event] : staging) buffer.reset();
  staging.clear();
  finished = true;
}

std::vector<HostBuffer> OperationState::take_results() {
  wait();
  std::lock_guard lock(mutex_);
  std::vector<HostBuffer> out = std::move(results);
  results.clear();
  result_events.clear();
  return out;
}

}  // namespace gpuxfer::detail
