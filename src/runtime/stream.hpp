// A move-only owner of one non-blocking CUDA stream.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include <gpuxfer/detail/device_guard.hpp>

namespace gpuxfer::detail {

/// A caller's stream (not the legacy default one): whether it captures into a CUDA graph, and its device.
/// CUDA refuses to tell a capturing stream's device (in every capture mode, invalidating the capture when
/// asked): such a stream is taken to be of the current device, as graph capture code has it.
struct CallerStream {
  bool capturing = false;
  int ordinal = -1;
  unsigned long long capture_id = 0;  // when capturing: the capture's id, unique in the process
};

/// Whether @p stream is a default stream's handle (0, cudaStreamLegacy, cudaStreamPerThread): it names a
/// stream of the current device, another on each device (the per-thread one on each thread too).
[[nodiscard]] inline bool is_default_stream(cudaStream_t stream) noexcept {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

/// For a CUDA call about a caller's @p stream (a wait, a query): asking needs a current context but no
/// particular one, and the runtime makes the current device's primary context current on a thread that
/// has none, for good. Under a HostContextGuard such a thread is left with none. The default streams'
/// handles name the current device's streams, so they are asked about as they are. Never throws.
class CallerStreamContext {
 public:
  explicit CallerStreamContext(cudaStream_t stream) noexcept {
    if (!is_default_stream(stream)) context_.emplace();
  }

 private:
  std::optional<HostContextGuard> context_;
};

/// The id of the capture @p stream belongs to (cudaStreamGetCaptureInfo), none when it captures nothing.
/// @throws Error(Errc::cuda_error) when CUDA cannot tell (a destroyed stream?), naming @p what
[[nodiscard]] std::optional<unsigned long long> capture_of(cudaStream_t stream, const std::string& what);

/// @p stream's CallerStream; @p what (the operation) and @p name ("the producer stream") in errors.
/// @throws Error(Errc::cuda_error) when CUDA cannot tell (a destroyed stream?)
[[nodiscard]] CallerStream caller_stream(cudaStream_t stream, const std::string& what,
                                         const std::string& name);

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
