// A move-only owner of one non-blocking CUDA stream.
#pragma once

#include <utility>

#include <cuda_runtime_api.h>

namespace gpuxfer::detail {

/// A non-blocking stream owned on one device. Move-only; the destructor never throws.
class Stream {
 public:
  Stream() noexcept = default;
  /// Creates a cudaStreamNonBlocking stream on @p device. @throws Error on failure
  explicit Stream(int device);
  ~Stream();
  Stream(Stream&& other) noexcept
      : device_(other.device_), stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  [[nodiscard]] cudaStream_t get() const noexcept { return stream_; }
  [[nodiscard]] int device() const noexcept { return device_; }

 private:
  void reset() noexcept;  // destroys the stream, if any

  int device_ = -1;
  cudaStream_t stream_ = nullptr;
};

}  // namespace gpuxfer::detail
