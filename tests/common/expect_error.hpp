/// @file expect_error.hpp
/// @brief Assertions on gpuxfer::Error: the code, and what the message must name.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <gpuxfer/error.hpp>

namespace gpuxfer::test {

/// True when @p text contains @p number as a whole number ("device 12" names 12, not 1 or 2).
inline bool names_number(std::string_view text, std::size_t number) {
  const std::regex whole("(^|[^0-9])" + std::to_string(number) + "([^0-9]|$)");
  return std::regex_search(text.begin(), text.end(), whole);
}

namespace detail {

/// Runs @p f; when it throws gpuxfer::Error with code @p want, returns what @p check says of it. Fails,
/// saying what happened instead, when it throws another code or another exception, or nothing.
template <class F, class Check>
::testing::AssertionResult throws_code(F&& f, Errc want, Check&& check) {
  try {
    std::forward<F>(f)();
  } catch (const Error& e) {
    if (e.code() != want) {
      return ::testing::AssertionFailure() << "threw Errc::" << to_string(e.code()) << " instead of Errc::"
                                           << to_string(want) << ": " << e.what();
    }
    return check(e);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-gpuxfer exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw (expected Errc::" << to_string(want) << ")";
}

/// Succeeds when the message of @p e contains every string of @p texts.
template <class Texts>
::testing::AssertionResult contains_all(const Error& e, const Texts& texts) {
  const std::string message = e.what();
  for (const auto& text : texts) {
    if (message.find(text) == std::string::npos) {
      return ::testing::AssertionFailure() << "message does not contain '" << text << "': " << message;
    }
  }
  return ::testing::AssertionSuccess() << message;
}

}  // namespace detail

/// Runs @p f; succeeds when it throws gpuxfer::Error with code @p want whose message contains every
/// string of @p texts. Fails, saying what happened instead, otherwise.
template <class F, class... Texts>
::testing::AssertionResult throws_error(F&& f, Errc want, const Texts&... texts) {
  return detail::throws_code(std::forward<F>(f), want, [&](const Error& e) {
    return detail::contains_all(e, std::initializer_list<std::string_view>{texts...});
  });
}

/// As throws_error, with the texts in a vector (the rows of a table).
template <class F>
::testing::AssertionResult throws_error_containing(F&& f, Errc want, const std::vector<std::string>& texts) {
  return detail::throws_code(std::forward<F>(f), want, [&](const Error& e) { return detail::contains_all(e, texts); });
}

/// As throws_error, and the message must also name one of @p numbers as a whole number (a device
/// index; "one of" where a function takes two indices and may check either first).
template <class F>
::testing::AssertionResult throws_error_naming_any(F&& f, Errc want, std::initializer_list<std::size_t> numbers) {
  return detail::throws_code(std::forward<F>(f), want, [&](const Error& e) {
    for (const std::size_t number : numbers) {
      if (names_number(e.what(), number)) return ::testing::AssertionSuccess() << e.what();
    }
    auto failure = ::testing::AssertionFailure() << "message names none of";
    for (const std::size_t number : numbers) failure << " " << number;
    return failure << ": " << e.what();
  });
}

/// As throws_error, and the message must also name @p number as a whole number (a device index).
template <class F>
::testing::AssertionResult throws_error_naming(F&& f, Errc want, std::size_t number) {
  return throws_error_naming_any(std::forward<F>(f), want, {number});
}

}  // namespace gpuxfer::test
