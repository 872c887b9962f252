#include <gpuxfer/pattern.hpp>

#include "pattern_mix.hpp"

namespace gpuxfer::pattern {

std::uint64_t seed_for(std::uint64_t run, std::size_t device) noexcept {
  return detail::splitmix64(run * 1000003ULL + device + 1);
}

std::uint8_t byte_at(std::uint64_t seed, std::uint64_t index) noexcept { return detail::pattern_byte(seed, index); }

void fill_host(std::span<std::byte> out, std::uint64_t seed, std::uint64_t offset) noexcept {
  std::uint64_t word_index = ~std::uint64_t{0};
  std::uint64_t word = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint64_t index = offset + i;
    if ((index >> 3) != word_index) {
      word_index = index >> 3;
      word = detail::pattern_word(seed, word_index);
    }
    out[i] = static_cast<std::byte>(word >> ((index & 7) * 8));
  }
}

std::size_t count_mismatches_host(std::span<const std::byte> data, std::uint64_t seed, std::uint64_t offset) noexcept {
  std::size_t wrong = 0;
  std::uint64_t word_index = ~std::uint64_t{0};
  std::uint64_t word = 0;
  for (std::size_t i = 0; i < data.size(); ++i) {
    const std::uint64_t index = offset + i;
    if ((index >> 3) != word_index) {
      word_index = index >> 3;
      word = detail::pattern_word(seed, word_index);
    }
    wrong += data[i] != static_cast<std::byte>(word >> ((index & 7) * 8));
  }
  return wrong;
}

}  // namespace gpuxfer::pattern
