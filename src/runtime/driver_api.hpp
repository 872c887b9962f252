// The few CUDA driver API calls gpuxfer needs, reached through cudaGetDriverEntryPointByVersion so that
// nothing links libcuda directly.
#pragma once

#include <cstddef>
#include <cstdint>

struct CUctx_st;  // the driver's CUcontext is a CUctx_st*

namespace gpuxfer::detail {

/// The allocation that contains @p ptr.
struct AddressRange {
  std::uintptr_t base = 0;
  std::size_t size = 0;
};

/// cuMemGetAddressRange for @p ptr (the caller makes the pointer's device current). Returns the driver's
/// CUresult: 0 on success; an error when the driver knows no allocation at that address (freed, host
/// memory) or the device has faulted (the sticky codes equal the runtime's: 700 illegal address, ...);
/// -1 when the entry point is unavailable.
[[nodiscard]] int address_range(const void* ptr, AddressRange& out) noexcept;

/// cuCtxGetCurrent: @p out is the calling thread's current context, nullptr when it has none. Returns the
/// driver's CUresult (0 on success), -1 when the entry point is unavailable.
[[nodiscard]] int current_context(CUctx_st*& out) noexcept;

/// cuCtxSetCurrent: makes @p context current on the calling thread; nullptr leaves it with none. Returns
/// the driver's CUresult (0 on success), -1 when the entry point is unavailable.
[[nodiscard]] int set_current_context(CUctx_st* context) noexcept;

/// cuThreadExchangeStreamCaptureMode: sets the calling thread's stream-capture mode to @p mode (a
/// CUstreamCaptureMode, numbered as cudaStreamCaptureMode) and leaves the one it had in @p mode. The
/// driver's call, not the runtime's: cudaThreadExchangeStreamCaptureMode makes the current device's
/// primary context current on a thread that had none. Returns the driver's CUresult (0 on success), -1
/// when the entry point is unavailable (@p mode unchanged).
[[nodiscard]] int exchange_capture_mode(int& mode) noexcept;

/// cuDevicePrimaryCtxGetState: whether CUDA ordinal @p ordinal's primary context exists (is active), so
/// that making it current creates nothing. False when the driver cannot say.
[[nodiscard]] bool primary_context_active(int ordinal) noexcept;

}  // namespace gpuxfer::detail
