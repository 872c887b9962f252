// Each GPU produces a result and registers it; gather_blocking brings every result but device 0's to the host.
#include <cstdio>
#include <vector>

#include <cuda_runtime_api.h>
#include <gpuxfer/gpuxfer.hpp>

int main() try {
  auto manager = gpuxfer::MultiGpuManager::create();  // every visible GPU; Errc::no_device if none
  gpuxfer::InterGpuTransfer transfer(manager);
  constexpr std::size_t bytes = std::size_t{4} << 20;
  std::vector<void*> results(manager->device_count());
  for (std::size_t i = 0; i < results.size(); ++i) {
    cudaSetDevice(manager->device(i).ordinal);
    if (cudaMalloc(&results[i], bytes) != cudaSuccess) return 1;
    cudaMemsetAsync(results[i], static_cast<int>(i + 1), bytes);  // the "compute pass" on device i
    transfer.set_device_buffer(i, results[i], bytes);             // later copies wait for that work
  }
  std::vector<gpuxfer::HostBuffer> gathered = transfer.gather_blocking(0);  // pinned, device 0 skipped
  int wrong = 0;
  for (std::size_t k = 0; k < gathered.size(); ++k) {  // gathered[k] is device k + 1's
    bool ok = gathered[k].size() == bytes;
    for (std::byte b : gathered[k].span()) ok = ok && b == static_cast<std::byte>(k + 2);
    std::printf("device %zu: %zu bytes %s\n", k + 1, gathered[k].size(), ok ? "ok" : "WRONG");
    wrong += ok ? 0 : 1;
  }
  std::printf("gathered %zu buffers to the host\n", gathered.size());
  for (void* p : results) cudaFree(p);
  return wrong;
} catch (const std::exception& e) {  // gpuxfer::Error is a std::runtime_error
  std::fprintf(stderr, "seed_example: %s\n", e.what());
  return 1;
}
