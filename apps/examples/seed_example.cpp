// Each GPU produces a result and registers it; gather_blocking brings every one but device 0's to the host.
#include <cstdio>

#include <cuda_runtime_api.h>
#include <gpuxfer/gpuxfer.hpp>

int main() try {
  auto manager = gpuxfer::MultiGpuManager::create();  // every visible GPU; Errc::no_device if none
  gpuxfer::InterGpuTransfer transfer(manager);
  for (std::size_t i = 0; i < manager->device_count(); ++i) {
    void* result = nullptr;  // device i's result (the process frees it at exit)
    cudaSetDevice(manager->device(i).ordinal);
    cudaMalloc(&result, 4 << 20);
    cudaMemsetAsync(result, static_cast<int>(i + 1), 4 << 20);  // the "compute pass" on device i
    transfer.set_device_buffer(i, result, 4 << 20);             // later copies wait for that work
  }
  const auto gathered = transfer.gather_blocking(0);  // pinned host buffers; gathered[k] is device k + 1's
  for (std::size_t k = 0; k < gathered.size(); ++k) {
    const std::byte* bytes = gathered[k].span().data();
    std::printf("device %zu: %zu bytes of %d\n", k + 1, gathered[k].size(), static_cast<int>(bytes[0]));
  }
} catch (const std::exception& e) {  // gpuxfer::Error is a std::runtime_error
  std::fprintf(stderr, "seed_example: %s\n", e.what());
  return 1;
}
