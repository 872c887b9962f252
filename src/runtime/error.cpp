#include <gpuxfer/error.hpp>

namespace gpuxfer {

std::string_view to_string(Errc code) noexcept {
  switch (code) {
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::invalid_buffer: return "invalid_buffer";
    case Errc::invalid_option: return "invalid_option";
    case Errc::no_device: return "no_device";
    case Errc::out_of_memory: return "out_of_memory";
    case Errc::unsupported: return "unsupported";
    case Errc::cuda_error: return "cuda_error";
    case Errc::nccl_error: return "nccl_error";
    case Errc::device_fault: return "device_fault";
    case Errc::comm_error: return "comm_error";
  }
  return "unknown";
}

Error::Error(Errc code, const std::string& message)
    : std::runtime_error("gpuxfer " + std::string(to_string(code)) + ": " + message), code_(code), message_(message) {}

}  // namespace gpuxfer
