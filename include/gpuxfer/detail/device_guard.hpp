// Scoped switches of the calling thread's CUDA context: to one device (DeviceGuard), or to any context
// for calls that need one but no particular device (HostContextGuard). Both leave the thread exactly as
// they found it, a thread that had no current context included. Not API (detail/): installed for the
// Python module, which makes CUDA calls of its own on its callers' threads.
#pragma once

#include <new>
#include <optional>

struct CUctx_st;

namespace gpuxfer::detail {

/// Makes @p device's primary context current for the guard's lifetime, then restores the context the
/// thread had before: the very same one (a context the caller created with cuCtxCreate too), or none on
/// a thread that had none. Restoring "none" matters: selecting device 0 instead would leave its primary
/// context current on every thread that ever called gpuxfer, and create it (hundreds of MiB) when the
/// manager does not use device 0.
class DeviceGuard {
 public:
  /// @throws Error(Errc::cuda_error / no_device) when the device cannot be made current
  explicit DeviceGuard(int device);
  /// As above for cleanup and queries that must not throw: when the device cannot be made current the
  /// guard does nothing (entered() is false) and the call that follows reports CUDA's own error.
  DeviceGuard(int device, std::nothrow_t) noexcept;
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  [[nodiscard]] bool entered() const noexcept { return entered_; }

 private:
  [[nodiscard]] int enter(int device) noexcept;  // the cudaError_t of cudaSetDevice

  CUctx_st* previous_ = nullptr;
  bool entered_ = false;
  bool restore_ = false;
};

/// For CUDA calls that need a current context but no particular device (pinning and unpinning host
/// memory, cudaPointerGetAttributes on host pointers): the thread's own context when it has one, else
/// @p device's primary context, else (@p device < 0) the primary context of the lowest ordinal that
/// already has one, so that no context is created; only when none exists yet the current device's (what
/// CUDA itself would pick). A context made current here is let go afterwards. Never throws.
class HostContextGuard {
 public:
  explicit HostContextGuard(int device = -1) noexcept;
  /// As above, but a primary context even when the thread has its own: for memory that outlives the
  /// call (the pinned pool's blocks, register_host's registrations), which a context the caller created
  /// would take with it when the caller destroys that context. On a thread whose only context is its
  /// own, that makes (for @p device < 0) the current device's primary context.
  struct PrimaryOnly {};
  HostContextGuard(int device, PrimaryOnly) noexcept;
  HostContextGuard(const HostContextGuard&) = delete;
  HostContextGuard& operator=(const HostContextGuard&) = delete;

 private:
  void enter_primary(int device) noexcept;  // @p device's primary context, or as the class says for -1

  std::optional<DeviceGuard> guard_;
};

}  // namespace gpuxfer::detail
