// copy_blocks' kernel: one thread block per piece (a layer of a block), grid-strided over the pieces.
// Loads come four 16-byte vectors per thread before their stores, so that reads of mapped host memory
// over PCIe, which wait for their answers, keep many requests in flight. Launched through
// cudaLaunchKernel, whose status is the launch's own.
#include "cuda/block_kernels.hpp"

namespace gpuxfer::detail {
namespace {

constexpr unsigned block_threads = 256;
constexpr unsigned unroll = 4;
constexpr std::uint64_t max_grid = 1u << 20;

// The pairs of one launch, by value: a small table where a launch has few pairs (block_kernels.hpp).
template <std::size_t N>
struct PairTable {
  std::int64_t pairs[N][2];
};
constexpr std::size_t small_table_pairs = 128;

__device__ void copy_piece(unsigned char* dst, const unsigned char* src, std::uint64_t size) {
  std::uint64_t done = 0;
  if (((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) & 15) == 0) {
    const std::uint64_t vectors = size / 16;
    const auto* s = reinterpret_cast<const uint4*>(src);
    auto* d = reinterpret_cast<uint4*>(dst);
    const std::uint64_t step = std::uint64_t{block_threads} * unroll;
    std::uint64_t base = 0;
    for (; base + step <= vectors; base += step) {
      uint4 v[unroll];
#pragma unroll
      for (unsigned u = 0; u < unroll; ++u) v[u] = s[base + u * block_threads + threadIdx.x];
#pragma unroll
      for (unsigned u = 0; u < unroll; ++u) d[base + u * block_threads + threadIdx.x] = v[u];
    }
    for (std::uint64_t i = base + threadIdx.x; i < vectors; i += block_threads) d[i] = s[i];
    done = vectors * 16;
  }
  for (std::uint64_t i = done + threadIdx.x; i < size; i += block_threads) dst[i] = src[i];
}

__device__ void copy_pair(const BlockKernelLayout& l, std::uint64_t s, std::uint64_t d, std::uint64_t layer) {
  const auto* from =
      static_cast<const unsigned char*>(l.src) + s * l.src_block_stride + layer * l.src_layer_stride;
  auto* to = static_cast<unsigned char*>(l.dst) + d * l.dst_block_stride + layer * l.dst_layer_stride;
  copy_piece(to, from, l.block_bytes);
}

template <std::size_t N>
__global__ void __launch_bounds__(block_threads)
    host_pairs_kernel(BlockKernelLayout l, std::uint64_t count, PairTable<N> table) {
  const std::uint64_t pieces = count * l.layers;
  for (std::uint64_t p = blockIdx.x; p < pieces; p += gridDim.x) {
    const std::uint64_t k = p / l.layers;
    copy_pair(l, static_cast<std::uint64_t>(table.pairs[k][0]), static_cast<std::uint64_t>(table.pairs[k][1]),
              p % l.layers);
  }
}

__global__ void __launch_bounds__(block_threads)
    device_pairs_kernel(BlockKernelLayout l, std::uint64_t count, const std::int64_t* pairs,
                        std::uint32_t* error_flag) {
  const std::uint64_t pieces = count * l.layers;
  for (std::uint64_t p = blockIdx.x; p < pieces; p += gridDim.x) {
    const std::uint64_t k = p / l.layers;
    const std::int64_t s = pairs[2 * k];
    const std::int64_t d = pairs[2 * k + 1];
    if (s < 0 || d < 0 || static_cast<std::uint64_t>(s) >= l.src_blocks ||
        static_cast<std::uint64_t>(d) >= l.dst_blocks) {
      if (error_flag != nullptr && threadIdx.x == 0)
        *reinterpret_cast<volatile std::uint32_t*>(error_flag) = 1;
      continue;
    }
    copy_pair(l, static_cast<std::uint64_t>(s), static_cast<std::uint64_t>(d), p % l.layers);
  }
}

unsigned grid_for(std::uint64_t pieces) {
  return static_cast<unsigned>(pieces < max_grid ? pieces : max_grid);
}

template <std::size_t N>
cudaError_t launch_host_pairs(const BlockKernelLayout& layout, const std::int64_t* pairs, std::size_t n,
                              cudaStream_t stream) {
  PairTable<N> table;
  for (std::size_t k = 0; k < n; ++k) {
    table.pairs[k][0] = pairs[2 * k];
    table.pairs[k][1] = pairs[2 * k + 1];
  }
  BlockKernelLayout l = layout;
  std::uint64_t count = n;
  void* args[] = {&l, &count, &table};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&host_pairs_kernel<N>),
                          dim3(grid_for(n * layout.layers)), dim3(block_threads), args, 0, stream);
}

}  // namespace

cudaError_t load_block_kernels() {
  cudaFuncAttributes attributes{};
  for (const void* kernel : {reinterpret_cast<const void*>(&host_pairs_kernel<small_table_pairs>),
                             reinterpret_cast<const void*>(&host_pairs_kernel<block_pairs_per_launch>),
                             reinterpret_cast<const void*>(&device_pairs_kernel)}) {
    if (const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel); err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t launch_block_copy_host_pairs(const BlockKernelLayout& layout, const std::int64_t* pairs,
                                         std::size_t count, cudaStream_t stream) {
  for (std::size_t first = 0; first < count; first += block_pairs_per_launch) {
    const std::size_t n = count - first < block_pairs_per_launch ? count - first : block_pairs_per_launch;
    const cudaError_t err =
        n <= small_table_pairs
            ? launch_host_pairs<small_table_pairs>(layout, pairs + 2 * first, n, stream)
            : launch_host_pairs<block_pairs_per_launch>(layout, pairs + 2 * first, n, stream);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t launch_block_copy_device_pairs(const BlockKernelLayout& layout, const std::int64_t* pairs,
                                           std::size_t count, std::uint32_t* error_flag,
                                           cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  BlockKernelLayout l = layout;
  std::uint64_t n = count;
  void* args[] = {&l, &n, &pairs, &error_flag};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&device_pairs_kernel),
                          dim3(grid_for(n * layout.layers)), dim3(block_threads), args, 0, stream);
}

}  // namespace gpuxfer::detail
