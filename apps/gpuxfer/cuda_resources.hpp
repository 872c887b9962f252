/// @file cuda_resources.hpp
/// @brief The few CUDA resources the tool owns itself (device memory, streams), as RAII types.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include <gpuxfer/error.hpp>

namespace gpuxfer::cli {

/// Throws Error(Errc::cuda_error) naming @p what and the CUDA error when @p status is not success.
inline void cuda_check(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    throw Error(Errc::cuda_error, what + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
  }
}

/// Makes @p ordinal current for its lifetime and restores the caller's device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int ordinal) {
    cuda_check(cudaGetDevice(&previous_), "cudaGetDevice");
    cuda_check(cudaSetDevice(ordinal), "cudaSetDevice(" + std::to_string(ordinal) + ")");
  }
  ~DeviceGuard() { static_cast<void>(cudaSetDevice(previous_)); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

/// @p bytes of device memory on CUDA device @p ordinal. Move-only.
class DeviceMemory {
 public:
  DeviceMemory(int ordinal, std::size_t bytes) : ordinal_(ordinal) {
    DeviceGuard guard(ordinal);
    cuda_check(cudaMalloc(&ptr_, bytes),
               "cudaMalloc(" + std::to_string(bytes) + " bytes) on device " + std::to_string(ordinal));
  }
  ~DeviceMemory() { release(); }
  DeviceMemory(DeviceMemory&& other) noexcept
      : ordinal_(other.ordinal_), ptr_(std::exchange(other.ptr_, nullptr)) {}
  DeviceMemory& operator=(DeviceMemory&& other) noexcept {
    if (this != &other) {
      release();
      ordinal_ = other.ordinal_;
      ptr_ = std::exchange(other.ptr_, nullptr);
    }
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  [[nodiscard]] void* get() const noexcept { return ptr_; }

 private:
  void release() noexcept {
    if (ptr_ != nullptr) {
      int previous = 0;
      static_cast<void>(cudaGetDevice(&previous));
      static_cast<void>(cudaSetDevice(ordinal_));
      static_cast<void>(cudaFree(ptr_));
      static_cast<void>(cudaSetDevice(previous));
      ptr_ = nullptr;
    }
  }

  int ordinal_ = 0;
  void* ptr_ = nullptr;
};

/// A non-blocking stream on CUDA device @p ordinal. Move-only.
class Stream {
 public:
  explicit Stream(int ordinal) : ordinal_(ordinal) {
    DeviceGuard guard(ordinal);
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags on device " + std::to_string(ordinal));
  }
  ~Stream() {
    if (stream_ != nullptr) {
      static_cast<void>(cudaStreamDestroy(stream_));
    }
  }
  Stream(Stream&& other) noexcept
      : ordinal_(other.ordinal_), stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }
  [[nodiscard]] int ordinal() const noexcept { return ordinal_; }
  /// Blocks until the work queued so far has completed.
  void synchronize() const { cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  int ordinal_ = 0;
  cudaStream_t stream_ = nullptr;
};

}  // namespace gpuxfer::cli
