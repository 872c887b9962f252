// The Python Manager: a holder of the shared MultiGpuManager that every Transfer of it shares.
#pragma once

#include <memory>

#include <gpuxfer/multi_gpu_manager.hpp>

namespace gpuxfer::python {

struct Manager {
  std::shared_ptr<MultiGpuManager> ptr;
};

}  // namespace gpuxfer::python
