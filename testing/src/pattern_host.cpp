#include <gpuxfer/testing/pattern.hpp>

#include "pattern_mix.hpp"

namespace gpuxfer::pattern {
namespace {

// Calls visit(i, want) for i in [0, bytes) with want = pattern byte offset + i of @p seed: one hash per
// pattern word.
template <class Visit>
void for_each_byte(std::size_t bytes, std::uint64_t seed, std::uint64_t offset, Visit&& visit) {
  std::uint64_t word_index = ~std::uint64_t{0};
  std::uint64_t word = 0;
  for (std::size_t i = 0; i < bytes; ++i) {
    const std::uint64_t index = offset + i;
    if ((index >> 3) != word_index) {
      word_index = index >> 3;
      word = detail::pattern_word(seed, word_index);
    }
    visit(i, static_cast<std::byte>(word >> ((index & 7) * 8)));
  }
}

}  // namespace

std::uint64_t seed_for(std::uint64_t run, std::size_t device) noexcept {
  return detail::splitmix64(run * 1000003ULL + device + 1);
}

std::uint8_t byte_at(std::uint64_t seed, std::uint64_t index) noexcept { return detail::pattern_byte(seed, index); }

void fill_host(std::span<std::byte> out, std::uint64_t seed, std::uint64_t offset) noexcept {
  for_each_byte(out.size(), seed, offset, [&](std::size_t i, std::byte want) { out[i] = want; });
}

std::size_t count_mismatches_host(std::span<const std::byte> data, std::uint64_t seed, std::uint64_t offset) noexcept {
  std::size_t wrong = 0;
  for_each_byte(data.size(), seed, offset, [&](std::size_t i, std::byte want) { wrong += data[i] != want; });
  return wrong;
}

}  // namespace gpuxfer::pattern
