// The host copy kernels (libc, AVX2 and AVX-512 streaming stores) copy every byte and nothing more, at
// every alignment of source and destination and at sizes around the streaming threshold and the
// kernels' 128- and 256-byte steps. A kernel this CPU lacks falls back to libc, so every case runs.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "memory/streaming_copy.hpp"

namespace gpuxfer::test {
namespace {

using ::gpuxfer::detail::CopyKernel;

std::byte byte_at(std::size_t i) { return static_cast<std::byte>((i * 131 + (i >> 9)) & 0xFF); }

class CpuStreamingCopy : public ::testing::TestWithParam<CopyKernel> {};

TEST_P(CpuStreamingCopy, CopiesEveryByteAtEveryAlignment) {
  constexpr std::size_t guard = 64;
  const std::size_t big = ::gpuxfer::detail::streaming_min_bytes;
  for (const std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{255}, big - 1, big, big + 1,
                                  big + 127, big + 255, 3 * big + 4097}) {
    for (const std::size_t dst_offset : {0, 1, 31, 32, 63}) {
      for (const std::size_t src_offset : {0, 7, 64}) {
        std::vector<std::byte> src(bytes + src_offset + guard);
        for (std::size_t i = 0; i < src.size(); ++i) src[i] = byte_at(i);
        std::vector<std::byte> dst(bytes + dst_offset + 2 * guard, std::byte{0xA5});
        ::gpuxfer::detail::copy_with(GetParam(), dst.data() + guard + dst_offset, src.data() + src_offset, bytes);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < bytes; ++i) wrong += dst[guard + dst_offset + i] != src[src_offset + i];
        for (std::size_t i = 0; i < guard + dst_offset; ++i) wrong += dst[i] != std::byte{0xA5};
        for (std::size_t i = guard + dst_offset + bytes; i < dst.size(); ++i) wrong += dst[i] != std::byte{0xA5};
        ASSERT_EQ(wrong, 0u) << ::gpuxfer::detail::to_string(GetParam()) << ": " << bytes << " bytes, dst + " << dst_offset
                             << ", src + " << src_offset;
      }
    }
  }
}

TEST_P(CpuStreamingCopy, TheChosenKernelIsNamed) {
  const std::string_view name = ::gpuxfer::detail::to_string(::gpuxfer::detail::copy_kernel());
  EXPECT_TRUE(name == "libc" || name == "avx2" || name == "avx512") << name;
  EXPECT_FALSE(::gpuxfer::detail::to_string(GetParam()).empty());
}

INSTANTIATE_TEST_SUITE_P(Kernels, CpuStreamingCopy,
                         ::testing::Values(CopyKernel::libc, CopyKernel::avx2, CopyKernel::avx512),
                         [](const ::testing::TestParamInfo<CopyKernel>& info) {
                           return std::string(::gpuxfer::detail::to_string(info.param));
                         });

}  // namespace
}  // namespace gpuxfer::test
