// Packs many small device ranges into one buffer so that one DMA moves them all: one block per piece,
// 16-byte loads and stores where source and destination are both aligned.
#include "engine/pack_kernels.hpp"

namespace gpuxfer::detail {
namespace {

constexpr unsigned pack_threads = 256;

__global__ void pack_kernel(const PackItem* items, unsigned char* packed) {
  const PackItem item = items[blockIdx.x];
  const auto* src = static_cast<const unsigned char*>(item.src);
  unsigned char* dst = packed + item.offset;
  std::uint64_t done = 0;
  if (((reinterpret_cast<std::uintptr_t>(src) | reinterpret_cast<std::uintptr_t>(dst)) & 15) == 0) {
    const std::uint64_t vectors = item.size / 16;
    const auto* s = reinterpret_cast<const uint4*>(src);
    auto* d = reinterpret_cast<uint4*>(dst);
    for (std::uint64_t i = threadIdx.x; i < vectors; i += blockDim.x) d[i] = s[i];
    done = vectors * 16;
  }
  for (std::uint64_t i = done + threadIdx.x; i < item.size; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

cudaError_t launch_pack(const PackItem* items, std::size_t count, void* packed, cudaStream_t stream) {
  // The grid's x dimension takes up to 2^31 - 1 blocks: far more pieces than anyone packs at once.
  pack_kernel<<<static_cast<unsigned>(count), pack_threads, 0, stream>>>(items, static_cast<unsigned char*>(packed));
  return cudaGetLastError();
}

}  // namespace gpuxfer::detail
