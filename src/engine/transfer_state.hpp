// The engine behind one InterGpuTransfer: the node it runs on and its registry.
#pragma once

#include "engine/registry.hpp"
#include "node/manager_state.hpp"

namespace gpuxfer::detail {

struct TransferState {
  explicit TransferState(ManagerState& manager) : m(manager), registry(manager) {}
  ManagerState& m;
  BufferRegistry registry;
};

}  // namespace gpuxfer::detail
