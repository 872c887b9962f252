/// @file cuda_check.hpp
/// @brief The CUDA check of gpuxfer_testing (the tests, the bench and `gpuxfer check`).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <cuda_runtime_api.h>

namespace gpuxfer::testing {

/// Throws std::runtime_error naming @p what and the CUDA error when @p status is not cudaSuccess.
///
/// Deliberately not gpuxfer::Error: when a test expects the library to throw Error(Errc::cuda_error), a
/// failing fixture step must not pass for it (tests/common/expect_error.hpp reports a non-gpuxfer
/// exception as a failure). Builds no message unless the call failed.
inline void cuda_check(cudaError_t status, std::string_view what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(status) + " (" +
                             cudaGetErrorString(status) + ")");
  }
}

}  // namespace gpuxfer::testing
