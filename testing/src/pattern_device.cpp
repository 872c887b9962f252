#include <string>

#include <gpuxfer/testing/cuda_check.hpp>
#include <gpuxfer/testing/pattern.hpp>

#include "pattern_kernels.hpp"

namespace gpuxfer::pattern {

using testing::cuda_check;

namespace {

// The launchers read their launch's status with cudaGetLastError, which also returns an error that an
// earlier call on this thread failed with and left: reported as that (and cleared), never as @p what's.
void no_error_left(const std::string& what) {
  const cudaError_t earlier = cudaGetLastError();
  if (earlier != cudaSuccess)
    cuda_check(earlier, "an earlier CUDA call on this thread left this error, before " + what);
}

}  // namespace

void fill_device(void* dst, std::size_t bytes, std::uint64_t seed, std::uint64_t offset, cudaStream_t stream) {
  if (bytes == 0) return;
  no_error_left("a pattern fill of " + std::to_string(bytes) + " bytes");
  const cudaError_t status = detail::launch_pattern_fill(dst, bytes, seed, offset, stream);
  if (status != cudaSuccess) cuda_check(status, "pattern fill of " + std::to_string(bytes) + " bytes");
}

void fill_device_slow(void* dst, std::size_t bytes, std::uint64_t seed, std::uint64_t spin_ns, cudaStream_t stream) {
  no_error_left("a spin kernel");
  cuda_check(detail::launch_spin(spin_ns, stream), "spin kernel");
  fill_device(dst, bytes, seed, 0, stream);
}

std::size_t count_mismatches_device(const void* data, std::size_t bytes, std::uint64_t seed, std::uint64_t offset,
                                    cudaStream_t stream) {
  if (bytes == 0) return 0;
  no_error_left("a pattern verify of " + std::to_string(bytes) + " bytes");
  unsigned long long* wrong = nullptr;
  cuda_check(cudaMallocAsync(reinterpret_cast<void**>(&wrong), sizeof *wrong, stream), "pattern verify");
  unsigned long long host = 0;
  cudaError_t err = cudaMemsetAsync(wrong, 0, sizeof *wrong, stream);
  if (err == cudaSuccess) err = detail::launch_pattern_count(data, bytes, seed, offset, wrong, stream);
  if (err == cudaSuccess) err = cudaMemcpyAsync(&host, wrong, sizeof host, cudaMemcpyDeviceToHost, stream);
  const cudaError_t freed = cudaFreeAsync(wrong, stream);
  if (err == cudaSuccess) err = freed;
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) cuda_check(err, "pattern verify of " + std::to_string(bytes) + " bytes");
  return static_cast<std::size_t>(host);
}

}  // namespace gpuxfer::pattern
