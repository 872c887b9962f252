// The bad-input table of the CPU tests (test_bad_input.cpp): what its rows may use, and the parts of the
// table, one file a concept (device indices, configuration and parsing); the pinned pool's rows are in
// test_bad_input.cpp with the fixture.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include <gpuxfer/gpuxfer.hpp>

#include "common/bad_input.hpp"

namespace gpuxfer::test {

inline constexpr std::size_t kPoolLimit = std::size_t{1} << 20;

// What a row may use: a manager over whatever devices exist (none on a CPU-only machine), an engine,
// a pool of its own, and indices past the end.
struct CpuWorld {
  std::shared_ptr<MultiGpuManager> manager;
  std::unique_ptr<InterGpuTransfer> xfer;
  std::unique_ptr<PinnedPool> pool;
  std::size_t count = 0;  // devices of the manager
  std::size_t bad = 0;    // an index past the end
  std::size_t other = 0;  // a second one, for functions with two
  int host_word = 0;
  std::vector<std::byte> data = std::vector<std::byte>(64, std::byte{1});
};

using CpuRow = Row<CpuWorld>;

/// Every public function that takes a device index, given one past the end (bad_input_index_rows.cpp).
std::vector<CpuRow> index_rows();

/// Options out of range through validate() and create(), a null manager; GPUXFER_* values that do not
/// parse or are out of range, through apply_env and through the process environment; parse_size,
/// parse_bool, parse_device_list (bad_input_config_rows.cpp).
std::vector<CpuRow> config_rows();

}  // namespace gpuxfer::test
