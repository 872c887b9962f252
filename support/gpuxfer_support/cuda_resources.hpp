/// @file cuda_resources.hpp
/// @brief The CUDA resources the command, the bench and the GPU tests own themselves (device memory,
///        pinned memory, streams, events), as move-only RAII types whose destructors never throw. Not
///        installed: the library's own handles are in src/cuda_handles.hpp.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <cuda_runtime_api.h>

#include <gpuxfer/error.hpp>

namespace gpuxfer::support {

/// Throws Error(Errc::cuda_error) naming @p what and the CUDA error when @p status is not success. Builds
/// no message unless it fails, so a check in a timed loop costs a comparison.
inline void cuda_check(cudaError_t status, std::string_view what) {
  if (status != cudaSuccess) {
    throw Error(Errc::cuda_error,
                std::string(what) + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
  }
}

/// Makes @p ordinal current for its lifetime and restores the caller's device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int ordinal) {
    cuda_check(cudaGetDevice(&previous_), "cudaGetDevice");
    const cudaError_t status = cudaSetDevice(ordinal);
    if (status != cudaSuccess) cuda_check(status, "cudaSetDevice(" + std::to_string(ordinal) + ")");
  }
  ~DeviceGuard() { static_cast<void>(cudaSetDevice(previous_)); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

/// @p bytes of device memory on CUDA device @p ordinal, from cudaMalloc.
class DeviceMemory {
 public:
  DeviceMemory() noexcept = default;
  DeviceMemory(int ordinal, std::size_t bytes) : ordinal_(ordinal), bytes_(bytes) {
    const DeviceGuard guard(ordinal);
    const cudaError_t status = cudaMalloc(&ptr_, bytes);
    if (status != cudaSuccess) {
      cuda_check(status,
                 "cudaMalloc(" + std::to_string(bytes) + " bytes) on device " + std::to_string(ordinal));
    }
  }
  ~DeviceMemory() { release(); }
  DeviceMemory(DeviceMemory&& other) noexcept
      : ordinal_(other.ordinal_),
        bytes_(std::exchange(other.bytes_, 0)),
        ptr_(std::exchange(other.ptr_, nullptr)) {}
  DeviceMemory& operator=(DeviceMemory&& other) noexcept {
    if (this != &other) {
      release();
      ordinal_ = other.ordinal_;
      bytes_ = std::exchange(other.bytes_, 0);
      ptr_ = std::exchange(other.ptr_, nullptr);
    }
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  [[nodiscard]] std::byte* get() const noexcept { return static_cast<std::byte*>(ptr_); }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  [[nodiscard]] int ordinal() const noexcept { return ordinal_; }

 private:
  void release() noexcept {
    if (ptr_ == nullptr) return;
    int previous = 0;
    static_cast<void>(cudaGetDevice(&previous));
    static_cast<void>(cudaSetDevice(ordinal_));
    static_cast<void>(cudaFree(ptr_));
    static_cast<void>(cudaSetDevice(previous));
    ptr_ = nullptr;
  }

  int ordinal_ = 0;
  std::size_t bytes_ = 0;
  void* ptr_ = nullptr;
};

/// @p bytes of pinned host memory from cudaHostAlloc with @p flags (portable by default: every device
/// may DMA it).
class PinnedMemory {
 public:
  PinnedMemory() noexcept = default;
  explicit PinnedMemory(std::size_t bytes, unsigned flags = cudaHostAllocPortable) : bytes_(bytes) {
    const cudaError_t status = cudaHostAlloc(&ptr_, bytes, flags);
    if (status != cudaSuccess) cuda_check(status, "cudaHostAlloc(" + std::to_string(bytes) + " bytes)");
  }
  ~PinnedMemory() { reset(); }
  PinnedMemory(PinnedMemory&& other) noexcept
      : bytes_(std::exchange(other.bytes_, 0)), ptr_(std::exchange(other.ptr_, nullptr)) {}
  PinnedMemory& operator=(PinnedMemory&& other) noexcept {
    if (this != &other) {
      reset();
      bytes_ = std::exchange(other.bytes_, 0);
      ptr_ = std::exchange(other.ptr_, nullptr);
    }
    return *this;
  }
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;

  [[nodiscard]] std::byte* data() const noexcept { return static_cast<std::byte*>(ptr_); }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  [[nodiscard]] std::span<std::byte> span() const noexcept { return {data(), bytes_}; }
  /// Frees the memory now (cudaFreeHost).
  void reset() noexcept {
    if (ptr_ != nullptr) static_cast<void>(cudaFreeHost(ptr_));
    ptr_ = nullptr;
    bytes_ = 0;
  }

 private:
  std::size_t bytes_ = 0;
  void* ptr_ = nullptr;
};

/// A non-blocking stream on CUDA device @p ordinal.
class Stream {
 public:
  explicit Stream(int ordinal) : ordinal_(ordinal) {
    const DeviceGuard guard(ordinal);
    const cudaError_t status = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    if (status != cudaSuccess)
      cuda_check(status, "cudaStreamCreateWithFlags on device " + std::to_string(ordinal));
  }
  ~Stream() {
    if (stream_ != nullptr) static_cast<void>(cudaStreamDestroy(stream_));
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

/// An event on CUDA device @p ordinal; @p timing selects whether cudaEventElapsedTime may use it.
class Event {
 public:
  Event(int ordinal, bool timing) : ordinal_(ordinal) {
    const DeviceGuard guard(ordinal);
    cuda_check(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming),
               "cudaEventCreateWithFlags");
  }
  ~Event() {
    if (event_ != nullptr) static_cast<void>(cudaEventDestroy(event_));
  }
  Event(Event&& other) noexcept : ordinal_(other.ordinal_), event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  [[nodiscard]] cudaEvent_t get() const noexcept { return event_; }
  [[nodiscard]] int ordinal() const noexcept { return ordinal_; }

 private:
  int ordinal_ = 0;
  cudaEvent_t event_ = nullptr;
};

}  // namespace gpuxfer::support
