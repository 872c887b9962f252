/// @file pattern.hpp
/// @brief Deterministic test patterns: fill and verify buffers on the host and on the GPU.
///
/// Byte @c i of the pattern for @p seed is a hash of (seed, i): no two seeds, offsets or devices give
/// the same stream, so a byte that lands in the wrong place, or a stale or zero byte, is caught. Used
/// by the tests, `gpuxfer check` and the benchmark (gpuxfer_testing: not part of the installed library).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <cuda_runtime_api.h>

namespace gpuxfer::pattern {

/// A seed for device @p device in run @p run: mixes both so every device's pattern differs.
[[nodiscard]] std::uint64_t seed_for(std::uint64_t run, std::size_t device) noexcept;

/// Byte @p index of the pattern for @p seed.
[[nodiscard]] std::uint8_t byte_at(std::uint64_t seed, std::uint64_t index) noexcept;

/// Writes pattern bytes [offset, offset + out.size()) into host memory @p out.
void fill_host(std::span<std::byte> out, std::uint64_t seed, std::uint64_t offset = 0) noexcept;

/// Number of bytes of @p data that differ from pattern bytes [offset, offset + data.size()).
[[nodiscard]] std::size_t count_mismatches_host(std::span<const std::byte> data, std::uint64_t seed,
                                                std::uint64_t offset = 0) noexcept;

/// Queues a kernel on @p stream (on the current device) that writes pattern bytes [offset, offset + bytes)
/// to device memory @p dst. @throws std::runtime_error when the launch fails
void fill_device(void* dst, std::size_t bytes, std::uint64_t seed, std::uint64_t offset, cudaStream_t stream);

/// As fill_device with offset 0, but the kernel first spins about @p spin_ns nanoseconds: a slow producer,
/// used to test that copies wait for the work that writes their source.
void fill_device_slow(void* dst, std::size_t bytes, std::uint64_t seed, std::uint64_t spin_ns,
                      cudaStream_t stream);

/// Counts, on the GPU, the bytes of device memory @p data that differ from the pattern; blocks on
/// @p stream until the count is known. @throws std::runtime_error when a CUDA call fails
[[nodiscard]] std::size_t count_mismatches_device(const void* data, std::size_t bytes, std::uint64_t seed,
                                                  std::uint64_t offset, cudaStream_t stream);

}  // namespace gpuxfer::pattern
