#include "runtime/stream.hpp"

#include <optional>
#include <string>

#include "runtime/cuda_check.hpp"

namespace gpuxfer::detail {

namespace {

std::optional<unsigned long long> query_capture(cudaStream_t stream, const std::string& what) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  GPUXFER_CUDA_TRY_CTX(cudaStreamGetCaptureInfo(stream, &status, &id), what + " (a destroyed stream?)");
  if (status == cudaStreamCaptureStatusNone) return std::nullopt;
  return id;
}

}  // namespace

std::optional<unsigned long long> capture_of(cudaStream_t stream, const std::string& what) {
  const CallerStreamContext context(stream);
  return query_capture(stream, what);
}

CallerStream caller_stream(cudaStream_t stream, const std::string& what, const std::string& name) {
  const CallerStreamContext context(stream);
  const std::optional<unsigned long long> capture =
      query_capture(stream, what + ": asking whether " + name + " captures");
  CallerStream caller{.capturing = capture.has_value(), .capture_id = capture.value_or(0)};
  if (!caller.capturing) {
    GPUXFER_CUDA_TRY_CTX(cudaStreamGetDevice(stream, &caller.ordinal),
                         what + ": asking the device of " + name);
  } else {
    GPUXFER_CUDA_TRY_CTX(cudaGetDevice(&caller.ordinal), what + ": the current device");
  }
  return caller;
}

Stream::Stream(int device) : device_(device) {
  DeviceGuard guard(device);
  GPUXFER_CUDA_TRY_CTX(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                       "creating a copy stream on ordinal " + std::to_string(device));
}

Stream::~Stream() { reset(); }

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    reset();
    device_ = other.device_;
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void Stream::reset() noexcept {
  if (stream_ == nullptr) return;
  const DeviceGuard guard(device_, std::nothrow);
  (void)handled(cudaStreamDestroy(stream_));
  stream_ = nullptr;
}

}  // namespace gpuxfer::detail
