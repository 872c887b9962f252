// Many small buffers per device (1000 x 4 KiB): what a batched gather must beat. The pieces sit 8 KiB
// apart in one arena per device, so no two are contiguous and no copy can cover two of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "bench.hpp"
#include "resources.hpp"
#include "timing.hpp"

namespace gpuxfer::bench {

struct SmallGatherSetup {
  static constexpr std::size_t count = 1000;   ///< pieces per device
  static constexpr std::size_t piece = 4096;   ///< bytes per piece
  static constexpr std::size_t stride = 8192;  ///< bytes from one piece's start to the next in the arena

  std::vector<DeviceMemory> arenas;  ///< per device: count x stride bytes
  PinnedMemory out;                  ///< devices x count x piece bytes: device-major, then piece order

  /// Piece @p k of device @p d in its arena.
  [[nodiscard]] std::byte* source(std::size_t d, std::size_t k) const noexcept {
    return arenas[d].get() + k * stride;
  }
  /// Where piece @p k of device @p d lands in out.
  [[nodiscard]] std::byte* target(std::size_t d, std::size_t k) const noexcept {
    return out.data() + (d * count + k) * piece;
  }
};

/// Allocates the arenas and the output for every device of @p b.
[[nodiscard]] SmallGatherSetup make_small_gather(Bench& b);

/// Fills every arena with its device's pattern for @p run, poisons the output and waits.
void prepare_small_gather(Bench& b, SmallGatherSetup& setup, std::uint64_t run);

/// Bytes of setup.out that differ from what the pieces of run @p run hold.
[[nodiscard]] std::size_t check_small_gather(Bench& b, const SmallGatherSetup& setup, std::uint64_t run);

/// gpuxfer's side of small_gather: every piece of every device into setup.out with one blocking
/// InterGpuTransfer::gather_slices call, timed with steady_clock around it, then checked with
/// check_small_gather. Called on a setup that prepare_small_gather has just prepared (its fills waited
/// for, as gather_slices requires). nullopt would report the operation as waived (no batched API).
[[nodiscard]] std::optional<Sample> run_small_gather_gpuxfer(Bench& b, SmallGatherSetup& setup,
                                                             std::uint64_t run);

}  // namespace gpuxfer::bench
