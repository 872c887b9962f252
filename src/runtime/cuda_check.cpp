#include "runtime/cuda_check.hpp"

#include <nccl.h>

namespace gpuxfer::detail {

bool is_sticky(cudaError_t err) noexcept {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorUnknown:
    // The ones CUDA documents as "the process must be terminated and relaunched" besides.
    case cudaErrorContained:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

Errc errc_for(cudaError_t err) noexcept {
  if (is_sticky(err)) return Errc::device_fault;
  if (err == cudaErrorMemoryAllocation) return Errc::out_of_memory;
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) return Errc::no_device;
  return Errc::cuda_error;
}

void throw_cuda(cudaError_t err, const char* expr, const char* file, int line, const std::string& context) {
  // A non-sticky error would otherwise be reported again by the next unrelated call.
  if (!is_sticky(err)) (void)cudaGetLastError();
  std::string message = context.empty() ? std::string{} : context + ": ";
  message += std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ") in " + expr + " at " +
             file + ":" + std::to_string(line);
  if (is_sticky(err)) message += "; the device is unusable until the process resets it";
  throw Error(errc_for(err), message);
}

void throw_nccl(int result, const char* expr, const char* file, int line, const std::string& context) {
  std::string message = context.empty() ? std::string{} : context + ": ";
  message += std::string("NCCL error ") + std::to_string(result) + " (" +
             ncclGetErrorString(static_cast<ncclResult_t>(result)) + ") in " + expr + " at " + file + ":" +
             std::to_string(line) + "; set NCCL_DEBUG=WARN for NCCL's own report";
  throw Error(Errc::nccl_error, message);
}

}  // namespace gpuxfer::detail
