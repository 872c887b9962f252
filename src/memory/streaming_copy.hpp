// memcpy at the host's memory speed for the large pieces the host copy workers move: non-temporal stores
// write the destination without reading it into the cache first, which is what bounds libc's memcpy when
// many threads copy at once (GPU.md: 35.6 GB/s with libc, 53.5 GB/s with streaming stores, 16 threads).
#pragma once

#include <cstddef>
#include <string_view>

namespace gpuxfer::detail {

/// The instructions copy_streaming runs.
enum class CopyKernel { libc, avx2, avx512 };

/// "libc", "avx2" or "avx512".
[[nodiscard]] std::string_view to_string(CopyKernel kernel) noexcept;

/// The kernel in use: the widest this CPU has, unless GPUXFER_HOST_COPY (libc, avx2, avx512, auto) asks
/// for another it has; read once.
[[nodiscard]] CopyKernel copy_kernel() noexcept;

/// Below this a copy is left to libc: its destination is likely read soon, from the cache.
inline constexpr std::size_t streaming_min_bytes = std::size_t{256} << 10;

/// memcpy(dst, src, bytes) for non-overlapping ranges: streaming stores over the aligned middle of a copy
/// of at least streaming_min_bytes (libc for the unaligned head and the tail, and for smaller copies).
void copy_streaming(void* dst, const void* src, std::size_t bytes) noexcept;

/// The same copy with @p kernel, if this CPU has it (else libc): for the bench and the tests.
void copy_with(CopyKernel kernel, void* dst, const void* src, std::size_t bytes) noexcept;

}  // namespace gpuxfer::detail
