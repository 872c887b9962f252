// parse_size, parse_bool and parse_device_list: what they accept and what they reject.
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include <gpuxfer/options.hpp>

#include "common/expect_error.hpp"

namespace gpuxfer {
namespace {

using test::throws_error;

constexpr std::size_t kKiB = std::size_t{1} << 10;

TEST(ParseSize, PlainBytes) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("1"), 1u);
  EXPECT_EQ(parse_size("18446744073709551615"), ~std::size_t{0}) << "the largest size_t";
}

TEST(ParseSize, KibiSuffixesAllMeanTheSame) {
  for (const std::string_view text : {"4K", "4KiB", "4KB", "4k"}) {
    EXPECT_EQ(parse_size(text), 4 * kKiB) << text;
  }
}

TEST(ParseSize, LargerSuffixes) {
  EXPECT_EQ(parse_size("8M"), std::size_t{8} << 20);
  EXPECT_EQ(parse_size("8MiB"), std::size_t{8} << 20);
  EXPECT_EQ(parse_size("512M"), std::size_t{512} << 20);
  EXPECT_EQ(parse_size("1G"), std::size_t{1} << 30);
  EXPECT_EQ(parse_size("4GiB"), std::size_t{4} << 30);
  EXPECT_EQ(parse_size("2T"), std::size_t{2} << 40);
}

TEST(ParseSize, GarbageIsRejectedAndQuoted) {
  for (const std::string_view text : {"", "abc", "-1", "4X", "K", "4KX", "4 K x"}) {
    EXPECT_TRUE(throws_error([&] { (void)parse_size(text); }, Errc::invalid_option)) << "'" << text << "'";
  }
  EXPECT_TRUE(throws_error([&] { (void)parse_size("4X"); }, Errc::invalid_option, "4X"));
}

TEST(ParseSize, OverflowIsRejected) {
  EXPECT_TRUE(throws_error([&] { (void)parse_size("99999999999T"); }, Errc::invalid_option));
  EXPECT_TRUE(throws_error([&] { (void)parse_size("18446744073709551616"); }, Errc::invalid_option));
  EXPECT_TRUE(throws_error([&] { (void)parse_size("16777216T"); }, Errc::invalid_option)) << "2^64 exactly";
}

TEST(ParseBool, EverySpellingInAnyCase) {
  for (const std::string_view yes : {"1", "on", "ON", "true", "True", "TRUE", "yes", "Yes"}) {
    EXPECT_TRUE(parse_bool(yes)) << yes;
  }
  for (const std::string_view no : {"0", "off", "OFF", "false", "False", "no", "NO"}) {
    EXPECT_FALSE(parse_bool(no)) << no;
  }
}

TEST(ParseBool, AnythingElseIsRejected) {
  for (const std::string_view text : {"", "2", "maybe", "onn", "yess", "-1", "t"}) {
    EXPECT_TRUE(throws_error([&] { (void)parse_bool(text); }, Errc::invalid_option)) << "'" << text << "'";
  }
}

TEST(ParseDeviceList, OrdinalsInOrder) {
  EXPECT_EQ(parse_device_list("0"), (std::vector<int>{0}));
  EXPECT_EQ(parse_device_list("0,1,3"), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(parse_device_list("3,1"), (std::vector<int>{3, 1}));
  EXPECT_EQ(parse_device_list("12"), (std::vector<int>{12}));
}

TEST(ParseDeviceList, MalformedListsAreRejected) {
  for (const std::string_view text : {"-1", "a", "0,,1", "1,", ",1", "0;1", "1.5", "99999999999999999999"}) {
    EXPECT_TRUE(throws_error([&] { (void)parse_device_list(text); }, Errc::invalid_option)) << "'" << text << "'";
  }
}

}  // namespace
}  // namespace gpuxfer
