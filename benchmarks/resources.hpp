// The CUDA and NCCL resources the bench owns itself (device memory, pinned memory, streams, events,
// communicators), as move-only RAII types whose destructors never throw.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <gpuxfer/error.hpp>

namespace gpuxfer::bench {

/// Throws Error(Errc::cuda_error) naming @p what and the CUDA error when @p status is not success. Takes a
/// C string so that a check in a timed loop builds no message unless it fails.
inline void cuda_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw Error(Errc::cuda_error,
                std::string(what) + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
  }
}

/// Throws Error(Errc::nccl_error) naming @p what and the NCCL error when @p status is not success.
inline void nccl_check(ncclResult_t status, const char* what) {
  if (status != ncclSuccess) {
    throw Error(Errc::nccl_error, std::string(what) + ": " + ncclGetErrorString(status));
  }
}

/// Makes @p ordinal current for its lifetime and restores the caller's device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int ordinal) {
    cuda_check(cudaGetDevice(&previous_), "cudaGetDevice");
    cuda_check(cudaSetDevice(ordinal), "cudaSetDevice");
  }
  ~DeviceGuard() { static_cast<void>(cudaSetDevice(previous_)); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

/// @p bytes of device memory on CUDA device @p ordinal.
class DeviceMemory {
 public:
  DeviceMemory() noexcept = default;
  DeviceMemory(int ordinal, std::size_t bytes) : ordinal_(ordinal), bytes_(bytes) {
    DeviceGuard guard(ordinal);
    cuda_check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
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
    cuda_check(cudaHostAlloc(&ptr_, bytes, flags), "cudaHostAlloc");
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
    DeviceGuard guard(ordinal);
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
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
  void synchronize() const { cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  int ordinal_ = 0;
  cudaStream_t stream_ = nullptr;
};

/// An event on CUDA device @p ordinal; @p timing selects whether cudaEventElapsedTime may use it.
class Event {
 public:
  Event(int ordinal, bool timing) : ordinal_(ordinal) {
    DeviceGuard guard(ordinal);
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

/// One NCCL communicator per ordinal of @p ordinals (rank i on ordinals[i]), from ncclCommInitAll.
class NcclComms {
 public:
  explicit NcclComms(const std::vector<int>& ordinals) : comms_(ordinals.size(), nullptr) {
    nccl_check(ncclCommInitAll(comms_.data(), static_cast<int>(comms_.size()), ordinals.data()),
               "ncclCommInitAll");
  }
  ~NcclComms() {
    for (ncclComm_t comm : comms_) {
      if (comm != nullptr) static_cast<void>(ncclCommDestroy(comm));
    }
  }
  NcclComms(const NcclComms&) = delete;
  NcclComms& operator=(const NcclComms&) = delete;

  [[nodiscard]] ncclComm_t get(std::size_t rank) const noexcept { return comms_[rank]; }

 private:
  std::vector<ncclComm_t> comms_;
};

}  // namespace gpuxfer::bench
