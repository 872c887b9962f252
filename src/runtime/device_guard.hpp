// A scoped switch of the calling thread's current device.
#pragma once

namespace gpuxfer::detail {

/// Makes @p device current for the guard's lifetime and restores the caller's device afterwards.
class DeviceGuard {
 public:
  /// @throws Error(Errc::cuda_error / no_device) when the device cannot be made current
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

}  // namespace gpuxfer::detail
