// Launcher of the kernel that packs many small device ranges into one contiguous buffer
// (pack_kernels.cu beside it). Plain C++17 types, as for the pattern kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace gpuxfer::detail {

/// One piece to pack: @p size bytes at @p src go to byte @p offset of the packed buffer.
struct PackItem {
  const void* src;
  std::uint64_t offset;
  std::uint64_t size;
};

/// Packs the @p count items described in device memory @p items into @p packed.
cudaError_t launch_pack(const PackItem* items, std::size_t count, void* packed, cudaStream_t stream);

}  // namespace gpuxfer::detail
