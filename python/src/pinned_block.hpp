// Gathered results: each pinned HostBuffer becomes a gpuxfer.PinnedBlock (the lease, with the buffer
// protocol) under a gpuxfer.PinnedArray (a numpy array that also speaks DLPack as kDLCUDAHost memory).
#pragma once

#include <nanobind/nanobind.h>

#include <gpuxfer/host_buffer.hpp>

namespace gpuxfer::python {

namespace nb = nanobind;

/// A 1-D uint8 gpuxfer.PinnedArray over @p buffer's pinned bytes, its PinnedBlock owning the lease until
/// the array, its views and every DLPack consumer of them are gone; None when @p buffer is empty.
/// @throws std::runtime_error when the package has not registered PinnedArray (gpuxfer/_pinned.py)
[[nodiscard]] nb::object host_array(HostBuffer&& buffer);

}  // namespace gpuxfer::python
