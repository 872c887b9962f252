// The state of one queued operation, behind its TransferHandle: the events that mark it done, the pinned
// staging its copies still use (given back to the pool only once the GPU is done with it), and the
// results it hands over.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <gpuxfer/host_buffer.hpp>

#include "runtime/event.hpp"

namespace gpuxfer::detail {

/// Never blocks when destroyed: what the GPU may still touch returns to the pool after its event. query(),
/// wait() and take_results() may be called from several threads at once (a handle shared by threads).
struct OperationState {
  explicit OperationState(std::string operation) : what(std::move(operation)) {}
  ~OperationState();
  OperationState(const OperationState&) = delete;
  OperationState& operator=(const OperationState&) = delete;

  /// The operation is done once @p event has completed; @p device names the device in messages.
  void track(SharedEvent event, std::string device);
  /// Keeps @p buffer out of the pool until @p last_use has completed.
  void hold(HostBuffer buffer, SharedEvent last_use);
  /// A gathered result, ready once @p written has completed.
  void add_result(HostBuffer buffer, SharedEvent written);

  /// True when every tracked event has completed. @throws Error on a failed copy
  [[nodiscard]] bool query();
  /// Blocks until every tracked event has completed (failed ones too), then gives staging memory back.
  /// @throws Error(Errc::device_fault / cuda_error) naming the device of the first failed event
  void wait();
  /// wait(), then hands the results over: to the first caller; later ones get none.
  [[nodiscard]] std::vector<HostBuffer> take_results();

  std::string what;
  std::vector<std::pair<SharedEvent, std::string>> events;
  std::vector<std::pair<HostBuffer, SharedEvent>> staging;
  std::vector<HostBuffer> results;
  std::vector<SharedEvent> result_events;
  std::atomic<bool> finished{false};

 private:
  std::mutex mutex_;  // wait()'s release of the staging and take_results(): one thread at a time
};

}  // namespace gpuxfer::detail
