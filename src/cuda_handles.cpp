#include "cuda_handles.hpp"

#include "cuda_check.hpp"

namespace gpuxfer::detail {

DeviceGuard::DeviceGuard(int device) {
  GPUXFER_CUDA_TRY(cudaGetDevice(&previous_));
  // Set even when it is already the current device: on a thread that has made no CUDA call yet this is
  // what makes the device's context current, which driver calls (cuMemGetAddressRange) need.
  GPUXFER_CUDA_TRY_CTX(cudaSetDevice(device), "device ordinal " + std::to_string(device));
  switched_ = previous_ != device;
}

DeviceGuard::~DeviceGuard() {
  if (switched_) (void)cudaSetDevice(previous_);
}

Stream::Stream(int device) : device_(device) {
  DeviceGuard guard(device);
  GPUXFER_CUDA_TRY_CTX(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                       "creating a copy stream on ordinal " + std::to_string(device));
}

Stream::~Stream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    device_ = other.device_;
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

Event::Event(int device) : device_(device) {
  DeviceGuard guard(device);
  GPUXFER_CUDA_TRY_CTX(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming),
                       "creating an event on ordinal " + std::to_string(device));
}

Event::~Event() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
}

void Event::record(cudaStream_t stream) {
  GPUXFER_CUDA_TRY_CTX(cudaEventRecord(event_, stream), "recording an event on ordinal " + std::to_string(device_));
}

SharedEvent record_event(int device, cudaStream_t stream) {
  auto event = std::make_shared<Event>(device);
  event->record(stream);
  return event;
}

void stream_wait(cudaStream_t stream, const SharedEvent& event) {
  if (event) GPUXFER_CUDA_TRY(cudaStreamWaitEvent(stream, event->get(), 0));
}

}  // namespace gpuxfer::detail
