/// @file block_copy.hpp
/// @brief copy_blocks: many fixed-size blocks between device and host memory, each at its own slot (the
///        KV-cache offload and load of LLM serving engines). Docs: docs/BLOCKS.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace gpuxfer {

/// How copy_blocks moves the bytes.
enum class BlockPath {
  automatic,    ///< chosen per call from the merged plan (docs/BLOCKS.md says how)
  copy_engine,  ///< one cudaMemcpyAsync (or cudaMemcpy2DAsync) per run of consecutive blocks; host pairs only
  batch,        ///< one cudaMemcpyBatchAsync of the runs; host pairs only
  kernel,       ///< a kernel on the device's SMs loads and stores the host memory it maps; no staging
};

/// One side of a block copy: block i's layer l starts at base + i * block_stride + l * layer_stride.
struct BlockLayout {
  void* base = nullptr;          ///< block 0's layer 0
  std::size_t blocks = 0;        ///< the region holds blocks 0 .. blocks - 1
  std::size_t block_stride = 0;  ///< bytes from a block to the next; 0: layers * block_bytes
  std::size_t layer_stride = 0;  ///< bytes from a block's layer to the next; 0: block_bytes
};

/// What copy_blocks copies: for each pair k, block pairs[2k] of @p src to block pairs[2k + 1] of @p dst,
/// @p layers pieces of @p block_bytes each.
struct BlockCopy {
  BlockLayout src{};
  BlockLayout dst{};
  const std::int64_t* pairs = nullptr;  ///< count x (source block, destination block): host or device memory
  std::size_t count = 0;                ///< pairs
  std::size_t block_bytes = 0;          ///< bytes of one layer of one block
  std::size_t layers = 1;               ///< pieces per block
  /// Pairs in device memory only (which the host cannot check): a kernel skips every pair out of range
  /// and stores 1 here (device memory, or host memory the device maps); null: none is stored. The
  /// blocking form uses a flag of its own and throws instead.
  std::uint32_t* error_flag = nullptr;
  BlockPath path = BlockPath::automatic;
};

/// Copies the blocks of @p copy after the work queued on @p stream, before its later work; returns once
/// queued, with the path taken. One region is device memory and the other page-locked host memory
/// (cudaHostAlloc, cudaHostRegister, register_host), or both are memory of one device; the device's
/// work is ordered on @p stream (a stream of that device; 0 is the legacy default stream). Capturable in a
/// CUDA graph: pairs in device memory are read at each launch, pairs in host memory are read now and
/// their plan is baked into the graph.
/// Host pairs are checked before anything is queued, so a call that throws has written nothing.
/// @throws Error(Errc::invalid_argument) for a pair out of range, two pairs writing one destination
///         block, a destination layout whose pieces overlap, a region that does not hold its blocks, or
///         pageable host memory (the message says how to pin it)
/// @throws Error(Errc::unsupported) for host-to-host or two devices, BlockPath::copy_engine/batch with
///         pairs in device memory, or BlockPath::kernel where the device does not map the host region
/// @note The regions and the pairs must stay valid and unchanged until @p stream gets past the copy.
///       Pairs in device memory with two pairs writing one block: one of them wins.
BlockPath copy_blocks_async(const BlockCopy& copy, cudaStream_t stream);

/// copy_blocks_async on the legacy default stream (as cudaMemcpy), then a wait: returns when the blocks
/// are there. @throws as copy_blocks_async, and Error(Errc::invalid_argument) after the copy when pairs
/// in device memory named a block out of range (those pairs were skipped, the others copied)
BlockPath copy_blocks(const BlockCopy& copy);

/// "automatic", "copy_engine", "batch" or "kernel".
[[nodiscard]] const char* to_string(BlockPath path) noexcept;

}  // namespace gpuxfer
