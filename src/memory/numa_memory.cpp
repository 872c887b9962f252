#include "memory/numa_memory.hpp"

#include <linux/mempolicy.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include <gpuxfer/error.hpp>

#include "runtime/cuda_check.hpp"

namespace gpuxfer::detail {

std::byte* allocate_on_node(std::size_t bytes, int node) {
  const std::string what = "pinned memory of " + std::to_string(bytes) + " bytes on NUMA node " + std::to_string(node);
  if (node < 0 || node >= 1024) throw Error(Errc::invalid_argument, what + ": no such node");
  void* block = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (block == MAP_FAILED) throw Error(Errc::out_of_memory, what + ": mmap failed: " + std::strerror(errno));
  // The node mask, one bit per node; maxnode counts bits and the kernel reads one less than it is told.
  std::vector<unsigned long> mask(1024 / (8 * sizeof(unsigned long)), 0);
  mask[static_cast<std::size_t>(node) / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
  if (syscall(SYS_mbind, block, bytes, MPOL_BIND, mask.data(), mask.size() * 8 * sizeof(unsigned long) + 1, 0) != 0) {
    const int err = errno;
    munmap(block, bytes);
    throw Error(err == EINVAL ? Errc::invalid_argument : Errc::out_of_memory,
                what + ": mbind failed: " + std::strerror(err));
  }
  // cudaHostRegister faults every page in, under the policy just set.
  const cudaError_t status = handled(cudaHostRegister(block, bytes, cudaHostRegisterPortable));
  if (status != cudaSuccess) {
    munmap(block, bytes);
    GPUXFER_CUDA_TRY_CTX(status, what);
  }
  return static_cast<std::byte*>(block);
}

void free_on_node(std::byte* block, std::size_t bytes) noexcept {
  if (block == nullptr) return;
  (void)handled(cudaHostUnregister(block));
  munmap(block, bytes);
}

int node_of_page(const void* ptr) noexcept {
  void* pages[1] = {const_cast<void*>(ptr)};
  int status[1] = {-1};
  if (syscall(SYS_move_pages, 0, 1, pages, nullptr, status, 0) != 0) return -errno;
  return status[0];
}

}  // namespace gpuxfer::detail
