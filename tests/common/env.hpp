/// @file env.hpp
/// @brief Environments for tests of the GPUXFER_* variables: a fake one for apply_env, and a real
///        variable set for one scope.
#pragma once

#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include <gpuxfer/options.hpp>

namespace gpuxfer::test {

/// A fake environment that remembers which names were asked for.
class FakeEnv {
 public:
  explicit FakeEnv(std::map<std::string, std::string> values) : values_(std::move(values)) {}

  [[nodiscard]] EnvLookup lookup() {
    return [this](std::string_view name) -> std::optional<std::string> {
      asked_.insert(std::string(name));
      const auto it = values_.find(std::string(name));
      return it == values_.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
  }
  [[nodiscard]] const std::set<std::string>& asked() const { return asked_; }

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> asked_;
};

/// Sets a real environment variable for one scope, and restores what was there after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace gpuxfer::test
