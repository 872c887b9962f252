/// @file fault_kernel.hpp
/// @brief A kernel that faults on purpose, for the tests of what gpuxfer does after a device fault.
///        C++17 and no gpuxfer header: fault_kernel.cu includes it, and nvcc compiles .cu files as C++17.
#pragma once

#include <cuda_runtime_api.h>

namespace gpuxfer::test {

/// Queues on @p stream (on the current device) a one-thread kernel that writes through @p address. With
/// an address no allocation covers (0x10) the device raises cudaErrorIllegalAddress, a sticky error that
/// leaves the device's context unusable for the rest of the process. Returns the launch error.
cudaError_t launch_illegal_write(void* address, cudaStream_t stream);

}  // namespace gpuxfer::test
