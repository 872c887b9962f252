// A byte range of one device's memory as the engine's copies see it.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

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
};

}  // namespace gpuxfer::detail
