/// @file error.hpp
/// @brief gpuxfer's single exception type and its error codes.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace gpuxfer {

/// What went wrong, as a code a caller can branch on. The message says the rest.
enum class Errc {
  invalid_argument,  ///< an argument is out of its domain (for example data larger than a destination)
  invalid_buffer,    ///< a device index is out of range, or a buffer is missing, freed or of the wrong device
  invalid_option,    ///< an Options field or a GPUXFER_* environment variable is out of range
  no_device,         ///< fewer usable CUDA devices than Options::min_devices
  out_of_memory,     ///< a device or pinned-host allocation failed, or the pinned pool's limit was reached
  unsupported,       ///< the requested path cannot run on this machine (for example peer copy without peer access)
  cuda_error,        ///< a CUDA runtime or driver call failed
  nccl_error,        ///< an NCCL call failed
  device_fault,      ///< a sticky device error (illegal address, launch failure): the device must be reset
  comm_error,        ///< a job of several processes failed: a rank unreachable, missing, inconsistent or out of time (rendezvous, NCCL communicator)
};

/// A short lowercase name for @p code ("invalid_buffer").
[[nodiscard]] std::string_view to_string(Errc code) noexcept;

/// The exception every gpuxfer function throws. what() names the device index, the sizes involved and
/// the CUDA or NCCL error name where there is one.
class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message);

  /// The error code.
  [[nodiscard]] Errc code() const noexcept { return code_; }
  /// The message without the "gpuxfer <code>: " prefix that what() carries.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

 private:
  Errc code_;
  std::string message_;
};

}  // namespace gpuxfer
