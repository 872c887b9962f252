// Launchers of copy_blocks' kernel (block_kernels.cu beside it): each thread block copies one piece (a
// layer of a block) at a time, loading and storing through the SMs, host memory included where the
// device maps it. Plain C++17 types, as for the other kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace gpuxfer::detail {

/// Where the blocks lie, as the device addresses them.
struct BlockKernelLayout {
  void* src = nullptr;
  void* dst = nullptr;
  std::uint64_t src_block_stride = 0;
  std::uint64_t src_layer_stride = 0;
  std::uint64_t dst_block_stride = 0;
  std::uint64_t dst_layer_stride = 0;
  std::uint64_t src_blocks = 0;
  std::uint64_t dst_blocks = 0;
  std::uint64_t block_bytes = 0;
  std::uint64_t layers = 1;
};

/// Pairs one launch takes by value (a kernel's parameters hold up to 32 KiB since CUDA 12.1). A launch
/// of at most 128 pairs passes a 2 KiB table instead: the driver copies every byte of the parameters.
inline constexpr std::size_t block_pairs_per_launch = 2000;

/// Copies the @p count pairs of host memory @p pairs (checked already; copied into the launch's
/// parameters, so the memory is free again on return and a captured graph keeps them).
cudaError_t launch_block_copy_host_pairs(const BlockKernelLayout& layout, const std::int64_t* pairs,
                                         std::size_t count, cudaStream_t stream);

/// Copies the @p count pairs of device memory @p pairs; a pair out of range is skipped and stores 1 in
/// @p error_flag (when not null).
cudaError_t launch_block_copy_device_pairs(const BlockKernelLayout& layout, const std::int64_t* pairs,
                                           std::size_t count, std::uint32_t* error_flag, cudaStream_t stream);

/// Loads copy_blocks' kernels into the current device's context. Under CUDA's lazy loading (the default)
/// a kernel is loaded at its first launch, and loading may wait for all work running on the device: a
/// stream-ordered copy_blocks_async would then block its caller until an earlier producer ends. Called
/// where a MultiGpuManager takes its devices, so that no operation loads a kernel.
cudaError_t load_block_kernels();

}  // namespace gpuxfer::detail
