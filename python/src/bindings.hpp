// The pieces of the _gpuxfer extension module, one concept per file; module.cpp puts them together.
#pragma once

#include <cstddef>
#include <cstdint>

#include <nanobind/nanobind.h>

namespace gpuxfer::python {

namespace nb = nanobind;

void bind_errors(nb::module_& m);        // errors.cpp: gpuxfer::Error -> gpuxfer.Error subclasses
void bind_options(nb::module_& m);       // options.cpp: Options, NumaPlacement, the path enums
void bind_manager(nb::module_& m);       // manager.cpp: Manager(**options), DeviceInfo, pool stats
void bind_host(nb::module_& m);          // host_memory.cpp: register_host, the array views helpers
void bind_pinned(nb::module_& m);        // pinned_block.cpp: PinnedBlock, the kDLCUDAHost view
void bind_handles(nb::module_& m);       // handles.cpp: TransferHandle, GatherHandle
void bind_transfer(nb::module_& m);      // transfer.cpp: _Transfer (the C++ half of gpuxfer.Transfer)
void bind_communicator(nb::module_& m);  // communicator.cpp: _Communicator (of gpuxfer.Communicator)
void bind_blocks(nb::module_& m);        // blocks.cpp: _copy_blocks (of gpuxfer.copy_blocks)

/// @p value, a device index Python gave as the argument @p name of @p call, checked against the manager's
/// @p count devices. Taken as a signed integer so that a negative one is refused by name here rather than
/// by nanobind's list of overloads.
/// @throws Error(Errc::invalid_buffer) naming the call, the argument, its value and the range
std::size_t device_index(std::int64_t value, std::size_t count, const char* call, const char* name);

}  // namespace gpuxfer::python
