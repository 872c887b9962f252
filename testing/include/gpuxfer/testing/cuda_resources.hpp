/// @file cuda_resources.hpp
/// @brief The CUDA resources the tests, the bench and `gpuxfer check` own themselves (device memory,
///        pinned memory, streams, events), as move-only RAII types. Constructors throw std::runtime_error
///        (cuda_check.hpp says why not gpuxfer::Error); destructors never throw. The library's own
///        handles are in its src/, not here.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <type_traits>

#include <cuda_runtime_api.h>

#include <gpuxfer/testing/cuda_check.hpp>

namespace gpuxfer::testing {

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

namespace detail {

/// Frees device memory with its device current, then restores the caller's; ignores errors (it runs in
/// destructors).
struct DeviceFree {
  int ordinal = 0;
  void operator()(std::byte* ptr) const noexcept {
    int previous = 0;
    const bool restore = cudaGetDevice(&previous) == cudaSuccess;
    static_cast<void>(cudaSetDevice(ordinal));
    static_cast<void>(cudaFree(ptr));
    if (restore) static_cast<void>(cudaSetDevice(previous));
  }
};

struct HostFree {
  void operator()(std::byte* ptr) const noexcept { static_cast<void>(cudaFreeHost(ptr)); }
};

/// Waits for the stream's work, so that memory freed after it is idle, then destroys it.
struct StreamDestroy {
  void operator()(cudaStream_t stream) const noexcept {
    static_cast<void>(cudaStreamSynchronize(stream));
    static_cast<void>(cudaStreamDestroy(stream));
  }
};

struct EventDestroy {
  void operator()(cudaEvent_t event) const noexcept { static_cast<void>(cudaEventDestroy(event)); }
};

}  // namespace detail

/// @p bytes of device memory on CUDA device @p ordinal, from cudaMalloc: one byte at least, so that a
/// size-0 buffer still has an address.
class DeviceMemory {
 public:
  DeviceMemory() noexcept = default;
  DeviceMemory(int ordinal, std::size_t bytes) : ordinal_(ordinal), size_(bytes) {
    const DeviceGuard guard(ordinal);
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, std::max<std::size_t>(bytes, 1));
    if (status != cudaSuccess) {
      cuda_check(status, "cudaMalloc of " + std::to_string(bytes) + " bytes on device " + std::to_string(ordinal));
    }
    owned_ = Owned(static_cast<std::byte*>(ptr), detail::DeviceFree{ordinal});
  }

  /// The memory's address; after free_now(), the stale address it had.
  [[nodiscard]] std::byte* get() const noexcept { return owned_ ? owned_.get() : freed_; }
  /// The size asked for (0 for a moved-from buffer).
  [[nodiscard]] std::size_t size() const noexcept { return get() != nullptr ? size_ : 0; }
  [[nodiscard]] int ordinal() const noexcept { return ordinal_; }

  /// Frees the memory now (a test of use-after-free detection); get() keeps the stale address.
  void free_now() {
    if (!owned_) return;
    const DeviceGuard guard(ordinal_);
    cuda_check(cudaFree(owned_.get()), "cudaFree");
    freed_ = owned_.release();
  }

 private:
  using Owned = std::unique_ptr<std::byte, detail::DeviceFree>;

  int ordinal_ = 0;
  std::size_t size_ = 0;
  Owned owned_;
  std::byte* freed_ = nullptr;
};

/// @p bytes of pinned host memory from cudaHostAlloc with @p flags (one byte at least). Portable by
/// default: every device may DMA it (as all pinned memory is under unified addressing).
class PinnedMemory {
 public:
  PinnedMemory() noexcept = default;
  explicit PinnedMemory(std::size_t bytes, unsigned flags = cudaHostAllocPortable) : size_(bytes) {
    void* ptr = nullptr;
    const cudaError_t status = cudaHostAlloc(&ptr, std::max<std::size_t>(bytes, 1), flags);
    if (status != cudaSuccess) cuda_check(status, "cudaHostAlloc of " + std::to_string(bytes) + " bytes");
    owned_.reset(static_cast<std::byte*>(ptr));
  }

  [[nodiscard]] std::byte* data() const noexcept { return owned_.get(); }
  /// The size asked for (0 once freed or moved from).
  [[nodiscard]] std::size_t size() const noexcept { return owned_ ? size_ : 0; }
  [[nodiscard]] std::span<std::byte> span() const noexcept { return {data(), size()}; }
  /// Frees the memory now (cudaFreeHost).
  void reset() noexcept { owned_.reset(); }

 private:
  std::size_t size_ = 0;
  std::unique_ptr<std::byte, detail::HostFree> owned_;
};

/// A non-blocking stream on CUDA device @p ordinal. Its destructor waits for the work queued on it.
class Stream {
 public:
  explicit Stream(int ordinal) : ordinal_(ordinal) {
    const DeviceGuard guard(ordinal);
    cudaStream_t stream = nullptr;
    const cudaError_t status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (status != cudaSuccess) cuda_check(status, "cudaStreamCreateWithFlags on device " + std::to_string(ordinal));
    owned_.reset(stream);
  }

  [[nodiscard]] cudaStream_t get() const noexcept { return owned_.get(); }
  [[nodiscard]] int ordinal() const noexcept { return ordinal_; }
  /// Blocks until the work queued so far has completed.
  void synchronize() const { cuda_check(cudaStreamSynchronize(get()), "cudaStreamSynchronize"); }

 private:
  int ordinal_ = 0;
  std::unique_ptr<std::remove_pointer_t<cudaStream_t>, detail::StreamDestroy> owned_;
};

/// An event on CUDA device @p ordinal; @p timing selects whether cudaEventElapsedTime may use it.
class Event {
 public:
  Event(int ordinal, bool timing) : ordinal_(ordinal) {
    const DeviceGuard guard(ordinal);
    cudaEvent_t event = nullptr;
    cuda_check(cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming),
               "cudaEventCreateWithFlags");
    owned_.reset(event);
  }

  [[nodiscard]] cudaEvent_t get() const noexcept { return owned_.get(); }
  [[nodiscard]] int ordinal() const noexcept { return ordinal_; }

 private:
  int ordinal_ = 0;
  std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, detail::EventDestroy> owned_;
};

}  // namespace gpuxfer::testing
