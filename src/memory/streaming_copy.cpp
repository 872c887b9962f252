#include "memory/streaming_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GPUXFER_X86 1
#endif

#include "runtime/log.hpp"

namespace gpuxfer::detail {
namespace {

using CopyFn = void (*)(std::byte*, const std::byte*, std::size_t) noexcept;

// Copies the bytes before @p dst reaches an @p align boundary with libc; returns how many.
std::size_t head_to_alignment(std::byte* dst, const std::byte* src, std::size_t bytes, std::size_t align) noexcept {
  const std::size_t head = std::min(bytes, (align - reinterpret_cast<std::uintptr_t>(dst) % align) % align);
  std::memcpy(dst, src, head);
  return head;
}

void copy_libc(std::byte* dst, const std::byte* src, std::size_t bytes) noexcept { std::memcpy(dst, src, bytes); }

#if GPUXFER_X86
__attribute__((target("avx2"))) void copy_avx2(std::byte* dst, const std::byte* src, std::size_t bytes) noexcept {
  const std::size_t head = head_to_alignment(dst, src, bytes, 32);
  dst += head;
  src += head;
  bytes -= head;
  constexpr std::size_t step = 4 * 32;
  for (; bytes >= step; dst += step, src += step, bytes -= step) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 64));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + 96), d);
  }
  _mm_sfence();  // the streaming stores are visible before whatever the caller does next
  std::memcpy(dst, src, bytes);
}

__attribute__((target("avx512f"))) void copy_avx512(std::byte* dst, const std::byte* src, std::size_t bytes) noexcept {
  const std::size_t head = head_to_alignment(dst, src, bytes, 64);
  dst += head;
  src += head;
  bytes -= head;
  constexpr std::size_t step = 4 * 64;
  for (; bytes >= step; dst += step, src += step, bytes -= step) {
    const __m512i a = _mm512_loadu_si512(src);
    const __m512i b = _mm512_loadu_si512(src + 64);
    const __m512i c = _mm512_loadu_si512(src + 128);
    const __m512i d = _mm512_loadu_si512(src + 192);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst), a);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + 64), b);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + 128), c);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + 192), d);
  }
  _mm_sfence();
  std::memcpy(dst, src, bytes);
}
#endif

bool cpu_has(CopyKernel kernel) noexcept {
  switch (kernel) {
    case CopyKernel::libc: return true;
#if GPUXFER_X86
    case CopyKernel::avx2: return __builtin_cpu_supports("avx2");
    case CopyKernel::avx512: return __builtin_cpu_supports("avx512f");
#else
    default: return false;
#endif
  }
  return false;
}

CopyFn function_of(CopyKernel kernel) noexcept {
  if (!cpu_has(kernel)) return copy_libc;
  switch (kernel) {
#if GPUXFER_X86
    case CopyKernel::avx2: return copy_avx2;
    case CopyKernel::avx512: return copy_avx512;
#endif
    default: return copy_libc;
  }
}

CopyKernel widest() noexcept {
  if (cpu_has(CopyKernel::avx512)) return CopyKernel::avx512;
  if (cpu_has(CopyKernel::avx2)) return CopyKernel::avx2;
  return CopyKernel::libc;
}

CopyKernel kernel_from_env() noexcept {
  const char* value = std::getenv("GPUXFER_HOST_COPY");
  if (value == nullptr || std::string_view(value) == "auto") return widest();
  for (const CopyKernel k : {CopyKernel::libc, CopyKernel::avx2, CopyKernel::avx512}) {
    if (to_string(k) != value) continue;
    if (cpu_has(k)) return k;
    GPUXFER_LOG(warn, "GPUXFER_HOST_COPY=" + std::string(value) + ": this CPU lacks it; using " +
                          std::string(to_string(widest())));
    return widest();
  }
  GPUXFER_LOG(warn, "GPUXFER_HOST_COPY=" + std::string(value) +
                        " is none of libc, avx2, avx512, auto; using " + std::string(to_string(widest())));
  return widest();
}

}  // namespace

std::string_view to_string(CopyKernel kernel) noexcept {
  static constexpr std::string_view names[] = {"libc", "avx2", "avx512"};  // in CopyKernel's order
  const auto index = static_cast<std::size_t>(kernel);
  return index < std::size(names) ? names[index] : names[0];
}

CopyKernel copy_kernel() noexcept {
  static const CopyKernel kernel = kernel_from_env();
  return kernel;
}

void copy_with(CopyKernel kernel, void* dst, const void* src, std::size_t bytes) noexcept {
  if (bytes < streaming_min_bytes) kernel = CopyKernel::libc;
  function_of(kernel)(static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), bytes);
}

void copy_streaming(void* dst, const void* src, std::size_t bytes) noexcept {
  static const CopyFn chosen = function_of(copy_kernel());
  if (bytes < streaming_min_bytes) {
    std::memcpy(dst, src, bytes);
    return;
  }
  chosen(static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), bytes);
}

}  // namespace gpuxfer::detail
