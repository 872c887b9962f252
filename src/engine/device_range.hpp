// A byte range of one device's memory as the engine's copies see it.
#pragma once

#include <cstddef>

#include "runtime/event.hpp"

namespace gpuxfer::detail {

/// A byte range in one device's memory, with the event after which it may be touched.
struct DeviceRange {
  std::size_t device = 0;
  std::byte* ptr = nullptr;
  std::size_t size = 0;
  SharedEvent ready;  // null: nothing to wait for
};

}  // namespace gpuxfer::detail
