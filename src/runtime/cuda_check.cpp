#include "runtime/cuda_check.hpp"

#include <string_view>

#include <dlfcn.h>
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

std::string describe_cuda_error(cudaError_t err) {
  const std::string name = cudaGetErrorName(err);
  if (err == cudaErrorInsufficientDriver) {
    // The runtime loads libcuda.so.1 itself: not loaded now means it found no driver at all.
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (driver == nullptr) {
      return "no NVIDIA driver is loaded: check that `nvidia-smi` lists the GPUs; if it fails, install or "
             "load the NVIDIA driver [" +
             name + "]";
    }
    dlclose(driver);
    int driver_version = 0;
    int runtime_version = 0;
    (void)handled(cudaDriverGetVersion(&driver_version));
    (void)handled(cudaRuntimeGetVersion(&runtime_version));
    const auto cuda_version = [](int v) {
      return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
    };
    return "the NVIDIA driver supports CUDA " + cuda_version(driver_version) + ", older than the CUDA " +
           cuda_version(runtime_version) +
           " runtime gpuxfer was built with: update the driver (`nvidia-smi` "
           "shows its version) [" +
           name + "]";
  }
  if (err == cudaErrorNoDevice) {
    return "no CUDA device is visible: check that `nvidia-smi` lists the GPUs and that CUDA_VISIBLE_DEVICES, "
           "if set, names them [" +
           name + "]";
  }
  return name + " (" + cudaGetErrorString(err) + ")";
}

const char* source_name(const char* file) noexcept {
  const std::string_view path(file);
  if (path.starts_with("src/")) return file;
  const std::size_t at = path.rfind("/src/");
  if (at != std::string_view::npos) return file + at + 1;
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? file : file + slash + 1;
}

void throw_cuda(cudaError_t err, const char* expr, const char* file, int line, const std::string& context) {
  // A non-sticky error would otherwise be reported again by the next unrelated call.
  if (!is_sticky(err)) (void)cudaGetLastError();
  std::string message = context.empty() ? std::string{} : context + ": ";
  message +=
      describe_cuda_error(err) + " in " + expr + " at " + source_name(file) + ":" + std::to_string(line);
  if (is_sticky(err)) message += "; the device is unusable until the process resets it";
  throw Error(errc_for(err), message);
}

void throw_nccl(int result, const char* expr, const char* file, int line, const std::string& context) {
  std::string message = context.empty() ? std::string{} : context + ": ";
  message += std::string("NCCL error ") + std::to_string(result) + " (" +
             ncclGetErrorString(static_cast<ncclResult_t>(result)) + ") in " + expr + " at " +
             source_name(file) + ":" + std::to_string(line) + "; set NCCL_DEBUG=WARN for NCCL's own report";
  throw Error(Errc::nccl_error, message);
}

}  // namespace gpuxfer::detail
