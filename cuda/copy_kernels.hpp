// Launchers of the kernels that copy bytes through the SMs (copy_kernels.cu beside it): packing many small
// device ranges into one contiguous buffer, and one small copy that a CUDA graph replays sooner as a kernel
// node than as a memcpy node. Plain C++17 types, as for the pattern kernels.
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

/// Copies @p bytes from @p src to @p dst on @p stream, both addresses the current device can load or store
/// (device memory, or page-locked host memory it maps). Meant for small copies: a block per 4 KiB, at
/// most 64.
cudaError_t launch_copy(void* dst, const void* src, std::size_t bytes, cudaStream_t stream);

/// Loads pack's and copy's kernels into the current device's context (see load_block_kernels).
cudaError_t load_copy_kernels();

/// Whether launch_copy (and launch_pack, per piece) moves @p dst and @p src as 16-byte vectors: both
/// 16-byte aligned. Otherwise it copies byte by byte.
[[nodiscard]] inline bool copy_moves_vectors(const void* dst, const void* src) noexcept {
  return ((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) & 15) == 0;
}

}  // namespace gpuxfer::detail
