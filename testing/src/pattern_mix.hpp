// The pattern's hash, shared by the host code and the kernels so both produce the same bytes.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GPUXFER_PATTERN_HD __host__ __device__ __forceinline__
#else
#define GPUXFER_PATTERN_HD inline
#endif

namespace gpuxfer::pattern::detail {

GPUXFER_PATTERN_HD std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// The 8 pattern bytes [8 * word, 8 * word + 8) for @p seed, little-endian.
GPUXFER_PATTERN_HD std::uint64_t pattern_word(std::uint64_t seed, std::uint64_t word) {
  return splitmix64(seed ^ (word * 0xD6E8FEB86659FD93ULL));
}

GPUXFER_PATTERN_HD std::uint8_t pattern_byte(std::uint64_t seed, std::uint64_t index) {
  return static_cast<std::uint8_t>(pattern_word(seed, index >> 3) >> ((index & 7) * 8));
}

}  // namespace gpuxfer::pattern::detail
