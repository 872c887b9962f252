// Each device produces a result, registers it with set_device_buffer, and
// gather_blocking reads every result except the destination's back into pinned host memory.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

#include <cuda_runtime_api.h>
#include <gpuxfer/gpuxfer.hpp>

static void check(cudaError_t status) {
  if (status != cudaSuccess) throw std::runtime_error(cudaGetErrorString(status));
}

struct CudaFree {
  void operator()(void* p) const noexcept { cudaFree(p); }
};

int main() try {
  auto manager = gpuxfer::MultiGpuManager::create();  // every visible GPU; Errc::no_device if none
  gpuxfer::InterGpuTransfer transfer(manager);

  constexpr std::size_t bytes = std::size_t{4} << 20;
  std::vector<std::unique_ptr<void, CudaFree>> results;
  for (std::size_t i = 0; i < manager->device_count(); ++i) {
    void* ptr = nullptr;
    check(cudaSetDevice(manager->device(i).ordinal));
    check(cudaMalloc(&ptr, bytes));
    results.emplace_back(ptr);
    check(cudaMemsetAsync(ptr, static_cast<int>(i + 1), bytes));  // the "compute pass" on device i
    transfer.set_device_buffer(i, ptr, bytes);                    // later copies wait for that work
  }

  // One pinned HostBuffer per source device, ascending, the destination (device 0) skipped.
  std::vector<gpuxfer::HostBuffer> gathered = transfer.gather_blocking(0);
  for (std::size_t k = 0; k < gathered.size(); ++k) {
    const std::size_t device = k + 1;
    bool ok = gathered[k].size() == bytes;
    for (std::byte b : gathered[k].span()) ok = ok && b == static_cast<std::byte>(device + 1);
    std::printf("device %zu: %zu bytes %s\n", device, gathered[k].size(), ok ? "ok" : "WRONG");
    if (!ok) return 1;
  }
  std::printf("gathered %zu buffers to the host\n", gathered.size());
  return 0;
} catch (const std::exception& e) {  // gpuxfer::Error is a std::runtime_error
  std::fprintf(stderr, "seed_example: %s\n", e.what());
  return 1;
}
