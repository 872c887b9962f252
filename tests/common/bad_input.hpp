/// @file bad_input.hpp
/// @brief The shape of the bad-input tables (tests/cpu/test_bad_input.cpp, tests/gpu/test_bad_input.cpp):
///        one row per (function, input), the Errc it must throw and the words its message must contain,
///        and the snapshots that show a rejected call changed nothing.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/inter_gpu_transfer.hpp>
#include <gpuxfer/multi_gpu_manager.hpp>
#include <gpuxfer/options.hpp>
#include <gpuxfer/pinned_pool.hpp>

#include "common/expect_error.hpp"

namespace gpuxfer::test {

/// What a message must contain.
using Texts = std::vector<std::string>;

/// @p value as text, for the messages rows expect.
inline std::string n(std::size_t value) { return std::to_string(value); }

/// One bad input (or one allowed one) of a table; @p World is what the table's calls may use.
template <class World>
struct Row {
  std::string name;                               // function_input: the test's name
  std::function<void(World&)> call;               // the call
  std::optional<Errc> code;                       // what it must throw; nullopt: allowed, must not throw
  std::function<Texts(const World&)> texts = {};  // what the message must contain
  std::function<void(World&)> setup = {};         // changes the registry before the snapshot
  std::function<void(Options&)> options = {};     // the manager's options, when not the defaults
  const char* separate_gpus = nullptr;            // what of separate GPUs the row needs, if anything
};

/// gtest prints a parameter in test listings and failures: the row's name says it all.
template <class World>
void PrintTo(const Row<World>& row, std::ostream* os) {
  *os << row.name;
}

template <class World>
std::string row_name(const ::testing::TestParamInfo<Row<World>>& info) {
  return info.param.name;
}

/// Runs the row's call on @p world: it must throw Error(code) whose message contains every text, or,
/// for an allowed input, nothing at all.
template <class World>
::testing::AssertionResult row_holds(const Row<World>& row, World& world) {
  if (row.code) {
    return throws_error_containing([&] { row.call(world); }, *row.code, row.texts ? row.texts(world) : Texts{});
  }
  try {
    row.call(world);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "must be accepted, threw: " << e.what();
  }
  return ::testing::AssertionSuccess();
}

/// MultiGpuManager::create asked for one device more than the @p World's count: no_device, saying how many
/// were found and needed. A row of both tables (with and without a GPU).
template <class World>
Row<World> more_devices_than_visible_row(std::string name) {
  return {std::move(name),
          [](World& w) {
            Options opts;
            opts.min_devices = static_cast<int>(w.count) + 1;
            (void)MultiGpuManager::create(opts);
          },
          Errc::no_device,
          [](const World& w) {
            return Texts{"found " + n(w.count) + " usable CUDA device(s), need at least " + n(w.count + 1)};
          }};
}

/// The manager's pinned pool asked for a byte more than its limit: out_of_memory, naming the limit.
template <class World>
Row<World> manager_pool_above_limit_row(std::string name) {
  return {std::move(name),
          [](World& w) { (void)w.manager->pinned_pool().acquire(w.manager->options().pool_limit_bytes + 1); },
          Errc::out_of_memory,
          [](const World& w) {
            return Texts{"pinned pool limit of " + n(w.manager->options().pool_limit_bytes) + " bytes"};
          }};
}

/// What an engine has registered on each of its devices.
using Registry = std::vector<std::optional<RegisteredBuffer>>;

inline Registry registry_of(const InterGpuTransfer& xfer, std::size_t devices) {
  Registry registry;
  for (std::size_t i = 0; i < devices; ++i) registry.push_back(xfer.device_buffer(i));
  return registry;
}

/// Every device of @p xfer has the registration it had in @p before: none, or the same pointer and size.
inline ::testing::AssertionResult registry_unchanged(const InterGpuTransfer& xfer, const Registry& before) {
  std::ostringstream changed;
  for (std::size_t i = 0; i < before.size(); ++i) {
    const auto now = xfer.device_buffer(i);
    if (now.has_value() != before[i].has_value()) {
      changed << " device " << i << (now ? " gained" : " lost") << " its registration;";
    } else if (now && (now->ptr != before[i]->ptr || now->size != before[i]->size)) {
      changed << " device " << i << " has " << now->ptr << " (" << now->size << " bytes), had " << before[i]->ptr
              << " (" << before[i]->size << " bytes);";
    }
  }
  if (changed.str().empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the registry changed:" << changed.str();
}

/// The counts of a pinned pool that a rejected call must leave as they were.
struct PoolSnapshot {
  std::size_t in_use, held, allocations;
  explicit PoolSnapshot(const PoolStats& s)
      : in_use(s.in_use), held(s.cached + s.pending), allocations(s.allocations) {}
  bool operator==(const PoolSnapshot&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const PoolSnapshot& s) {
  return os << "{in_use " << s.in_use << ", cached+pending " << s.held << ", allocations " << s.allocations
            << "}";
}

}  // namespace gpuxfer::test
