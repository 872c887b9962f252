// RAII owners of CUDA handles: a device guard, streams and events. Move-only; destructors never throw.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include <cuda_runtime_api.h>

namespace gpuxfer::detail {

/// Makes @p device current for the guard's lifetime and restores the caller's device afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

/// A non-blocking stream owned on one device.
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
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
};

/// An event without timing, owned on one device.
class Event {
 public:
  /// Creates the event on @p device. @throws Error on failure
  explicit Event(int device);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  [[nodiscard]] cudaEvent_t get() const noexcept { return event_; }
  [[nodiscard]] int device() const noexcept { return device_; }
  /// Records the event on @p stream (a stream of the same device). @throws Error on failure
  void record(cudaStream_t stream);

 private:
  int device_ = -1;
  cudaEvent_t event_ = nullptr;
};

/// A stream-ordered memory pool of one device that keeps up to @p keep_bytes of freed memory mapped, so
/// that repeated cudaMallocFromPoolAsync calls of scratch space cost no mapping (the device's default
/// pool gives memory back to the OS at every synchronisation, and gpuxfer leaves the default alone).
class MemPool {
 public:
  MemPool(int device, std::size_t keep_bytes);
  ~MemPool();
  MemPool(const MemPool&) = delete;
  MemPool& operator=(const MemPool&) = delete;

  [[nodiscard]] cudaMemPool_t get() const noexcept { return pool_; }

 private:
  cudaMemPool_t pool_ = nullptr;
};

using SharedEvent = std::shared_ptr<Event>;

/// An event of @p device from a process-wide cache (creating events costs microseconds, which small
/// transfers feel); it returns to the cache when the last owner lets go.
[[nodiscard]] SharedEvent make_event(int device);

/// An event from the cache on @p device, recorded on @p stream.
[[nodiscard]] SharedEvent record_event(int device, cudaStream_t stream);

/// Makes @p stream wait for @p event on the GPU (no host blocking); a null event is a no-op.
void stream_wait(cudaStream_t stream, const SharedEvent& event);

}  // namespace gpuxfer::detail
