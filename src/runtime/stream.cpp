#include "runtime/stream.hpp"

#include <string>

#include "runtime/cuda_check.hpp"
#include "runtime/device_guard.hpp"

namespace gpuxfer::detail {

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
  (void)cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

}  // namespace gpuxfer::detail
