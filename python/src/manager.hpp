// The Python Manager: a holder of the shared MultiGpuManager that every Transfer of it shares.
#pragma once

#include <memory>

#include <nanobind/nanobind.h>

#include <gpuxfer/multi_gpu_manager.hpp>

namespace gpuxfer::python {

namespace nb = nanobind;

struct Manager {
  /// With the GIL released: the last reference ends the manager (NCCL communicators, copy streams, the
  /// pool's pinned blocks), which waits for the GPU.
  ~Manager() {
    if (!ptr) return;
    nb::gil_scoped_release gil;
    ptr.reset();
  }

  std::shared_ptr<MultiGpuManager> ptr;
};

}  // namespace gpuxfer::python
