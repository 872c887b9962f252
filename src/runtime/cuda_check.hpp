// Checked CUDA and NCCL calls: every failure becomes a gpuxfer::Error naming the call, file:line, the
// error's name and text, and the caller's context (device index, sizes).
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include <gpuxfer/error.hpp>

namespace gpuxfer::detail {

/// The Errc a CUDA error maps to: device_fault for sticky errors, out_of_memory, else cuda_error.
[[nodiscard]] Errc errc_for(cudaError_t err) noexcept;

/// True for errors that leave the context unusable (illegal address, launch failure, ...).
[[nodiscard]] bool is_sticky(cudaError_t err) noexcept;

/// @p err, the status of a call whose failure is dealt with here, without a throw (a destructor's, a
/// query's, a fallback's); a failure's mark on the thread's last error cleared (not cudaErrorNotReady's,
/// which sets none; a sticky error stays for every call), so that the caller's next cudaGetLastError,
/// after a kernel launch of its own, does not report it as that launch's.
inline cudaError_t handled(cudaError_t err) noexcept {
  if (err != cudaSuccess && err != cudaErrorNotReady && !is_sticky(err)) (void)cudaGetLastError();
  return err;
}

/// CUDA's name and text for @p err; where no driver is loaded, the driver is too old or no device is
/// visible, what that means and what to check instead (nvidia-smi, the driver, CUDA_VISIBLE_DEVICES).
[[nodiscard]] std::string describe_cuda_error(cudaError_t err);

/// @p file below the project's root (src/...), without the directories of the machine that built it.
[[nodiscard]] const char* source_name(const char* file) noexcept;

[[noreturn]] void throw_cuda(cudaError_t err, const char* expr, const char* file, int line,
                             const std::string& context);

[[noreturn]] void throw_nccl(int result, const char* expr, const char* file, int line,
                             const std::string& context);

}  // namespace gpuxfer::detail

/// Checks a CUDA call; on failure throws gpuxfer::Error with the call, file:line and error name.
#define GPUXFER_CUDA_TRY(call) GPUXFER_CUDA_TRY_CTX(call, std::string{})

/// As GPUXFER_CUDA_TRY, adding @p context (a std::string naming the device, sizes) to the message.
#define GPUXFER_CUDA_TRY_CTX(call, context)                                                 \
  do {                                                                                      \
    const cudaError_t gpuxfer_err_ = (call);                                                \
    if (gpuxfer_err_ != cudaSuccess) {                                                      \
      ::gpuxfer::detail::throw_cuda(gpuxfer_err_, #call, __FILE__, __LINE__, (context));    \
    }                                                                                       \
  } while (0)

/// Checks an NCCL call (ncclResult_t); on failure throws gpuxfer::Error(Errc::nccl_error).
#define GPUXFER_NCCL_TRY_CTX(call, context)                                                 \
  do {                                                                                      \
    const auto gpuxfer_res_ = (call);                                                       \
    if (gpuxfer_res_ != ncclSuccess) {                                                      \
      ::gpuxfer::detail::throw_nccl(static_cast<int>(gpuxfer_res_), #call, __FILE__,        \
                                    __LINE__, (context));                                   \
    }                                                                                       \
  } while (0)
