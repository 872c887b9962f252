// What the probes of benchmarks/probes share: a failed CUDA call ends the probe (exit 1) with the
// probe's name and the call, a main that reports the library's errors, and the median of a set of
// samples.
#pragma once

#include <gpuxfer/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace gpuxfer::probe {

/// Ends the probe with exit code 1 when @p e is an error, naming @p what.
inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, cudaGetErrorString(e));
  std::exit(1);
}

/// True when CUDA sees a device; else false, after saying why on stderr (the probe then exits 2).
[[nodiscard]] inline bool has_device() {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e == cudaSuccess && devices > 0) return true;
  std::fprintf(stderr, "%s: no CUDA device: %s\n", program_invocation_short_name,
               e != cudaSuccess ? cudaGetErrorString(e) : "none visible");
  return false;
}

/// The median of @p samples (the upper one of an even count); @p samples must not be empty.
[[nodiscard]] inline double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

/// The exit code of @p body (the probe's work), or, when it throws gpuxfer::Error, the message on stderr
/// with the probe's name and 2 for no device, 1 otherwise.
template <typename Body>
[[nodiscard]] int main_of(const Body& body) {
  try {
    return body();
  } catch (const gpuxfer::Error& e) {
    std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, e.what());
    return e.code() == gpuxfer::Errc::no_device ? 2 : 1;
  }
}

}  // namespace gpuxfer::probe
