// Launchers of the pattern kernels (pattern_kernels.cu, beside this header). Plain C++17 types: the CUDA sources build
// as C++17, which every supported CMake knows how to ask nvcc for.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace gpuxfer::pattern::detail {

cudaError_t launch_pattern_fill(void* dst, std::size_t bytes, std::uint64_t seed, std::uint64_t offset,
                                cudaStream_t stream);
cudaError_t launch_pattern_count(const void* data, std::size_t bytes, std::uint64_t seed, std::uint64_t offset,
                                 unsigned long long* wrong, cudaStream_t stream);
cudaError_t launch_spin(std::uint64_t spin_ns, cudaStream_t stream);

}  // namespace gpuxfer::pattern::detail
