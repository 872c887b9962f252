// A byte range of one device's memory as the engine's copies see it.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

#include "node/manager_state.hpp"
#include "runtime/event.hpp"

namespace gpuxfer::detail {

class BufferOrder;

/// A byte range in one device's memory, with the events after which it may be touched.
struct DeviceRange {
  std::size_t device = 0;
  std::byte* ptr = nullptr;
  std::size_t size = 0;
  std::vector<SharedEvent> ready;      // what must finish before the range is touched (OperationOrder)
  std::shared_ptr<BufferOrder> order;  // the registration's ordering state; null for caller memory
  /// The stream the registration belongs to (its producer), as the operation's snapshot saw it.
  cudaStream_t producer = cudaStreamLegacy;
  /// Set by OperationOrder::begin() when the operation's single copy of the range may run on the
  /// buffer's own stream (OperationOrder::add's OwnStream::allowed): that stream's order then covers the
  /// wait for its earlier work and its later work's wait for the copy. Null: a gpuxfer stream.
  cudaStream_t own_stream = nullptr;
  /// Set by OperationOrder::begin() while the caller's stream captures a graph: the device's streams this
  /// capture took (ManagerState::capture_streams). Null: the device's own (ManagerState::streams_of).
  DeviceStreams* streams = nullptr;
};

/// The streams the engine queues @p r's work on (DeviceRange::streams).
[[nodiscard]] inline DeviceStreams& streams_for(const ManagerState& m, const DeviceRange& r) noexcept {
  return r.streams != nullptr ? *r.streams : m.streams_of(r.device);
}

}  // namespace gpuxfer::detail
