// copy_blocks' plan, without a GPU: each side's layout resolved and checked, the pairs checked (range,
// one writer per destination block) and merged into runs of consecutive blocks, the runs cut into the
// contiguous pieces the copy engines move, and the path chosen. What a step returns, and what it uses
// meanwhile, comes from @p memory (copy_blocks passes a pool of its thread's, plan_memory()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <span>
#include <vector>

#include <gpuxfer/block_copy.hpp>

namespace gpuxfer::detail {

/// One side's layout with its strides resolved, and the bytes from its base to the end of its last block.
struct BlockGeometry {
  std::size_t blocks = 0;
  std::size_t block_stride = 0;
  std::size_t layer_stride = 0;
  std::size_t extent = 0;
};

/// Resolves @p side's strides (0: packed) and checks that they fit @p block_bytes, that the extent does
/// not overflow and, for a destination (@p writes), that no two pieces overlap. @p what names the side.
/// @throws Error(Errc::invalid_argument)
[[nodiscard]] BlockGeometry resolve_layout(const BlockLayout& side, std::size_t block_bytes,
                                           std::size_t layers, bool writes, const char* what);

/// A run of consecutive blocks: source blocks src .. src + blocks - 1 to destination blocks dst ...
struct BlockRun {
  std::size_t src = 0;
  std::size_t dst = 0;
  std::size_t blocks = 0;
};

/// Checks every pair (both indices in range, no destination block written twice) and merges pairs whose
/// source and destination blocks both follow the previous pair's into runs, in the order given.
/// @throws Error(Errc::invalid_argument) naming the first bad pair
[[nodiscard]] std::pmr::vector<BlockRun> plan_block_runs(
    std::span<const std::int64_t> pairs, std::size_t src_blocks, std::size_t dst_blocks,
    std::pmr::memory_resource* memory = std::pmr::get_default_resource());

/// @p runs (of plan_block_runs, over a destination of @p dst_blocks blocks) in destination order, merged
/// again: fewer runs where the caller's order was shuffled. Linear where the destination holds at most a
/// few times as many blocks as there are runs, else a sort.
[[nodiscard]] std::pmr::vector<BlockRun> runs_in_destination_order(
    std::span<const BlockRun> runs, std::size_t dst_blocks,
    std::pmr::memory_resource* memory = std::pmr::get_default_resource());

/// Whether the copy engines take the runs in destination order (@p sorted_runs of them) over the caller's
/// order (@p given_runs): where that merges at least one run in destination_order_min_gain. Every run
/// merged saves a copy (about 0.4 us of host time in a batch); taking the order builds the pieces again
/// before the first copy is queued (about 6 ns a run on one core of the CI machine), which a shuffle that
/// merges a run or two by chance does not repay.
inline constexpr std::size_t destination_order_min_gain = 64;
[[nodiscard]] bool destination_order_pays(std::size_t given_runs, std::size_t sorted_runs) noexcept;

/// One copy of a plan: @p height rows of @p width bytes, rows @p src_pitch / @p dst_pitch apart (one
/// row: a plain copy), at byte offsets from each side's base.
struct BlockPiece {
  std::size_t src_offset = 0;
  std::size_t dst_offset = 0;
  std::size_t width = 0;
  std::size_t height = 1;
  std::size_t src_pitch = 0;
  std::size_t dst_pitch = 0;
};

/// The copies that move @p runs: one per run where a run is contiguous on both sides, one per run and
/// layer where a block's layers are apart; rows of a strided run as a 2D copy.
[[nodiscard]] std::pmr::vector<BlockPiece> block_pieces(
    std::span<const BlockRun> runs, const BlockGeometry& src, const BlockGeometry& dst,
    std::size_t block_bytes, std::size_t layers,
    std::pmr::memory_resource* memory = std::pmr::get_default_resource());

/// The calling thread's pool for copy_blocks' plans: a plan's vectors come from it and go back to it, so
/// that a thread copying blocks call after call reuses their memory instead of asking the C library for
/// it each time (whose heap, trimmed after every call, made the host work before the first copy 2-3 x as
/// long). It keeps the most a plan has held on the thread, blocks of up to 4 MiB (larger ones are
/// returned at once), until the thread ends.
[[nodiscard]] std::pmr::memory_resource* plan_memory();

/// Contiguous rows of @p pieces (what cudaMemcpyBatchAsync takes: 2D pieces cut into their rows).
[[nodiscard]] std::size_t row_count(std::span<const BlockPiece> pieces) noexcept;

/// BlockPath::automatic's thresholds, from gpuxfer-bench --ops 'blocks_*' on an H100 (64 MiB of blocks):
/// rows this long on average (runs merged) go to the copy engines, one DMA each;
inline constexpr std::size_t copy_engine_min_row = std::size_t{4} << 20;
/// rows shorter than this go to the kernel when it stores into host memory (D2H: 0.76 / 0.93 of the link
/// at 4 / 64 KiB, random order, against 0.19 / 0.74 for one batch), longer ones to a batch (split over
/// streams: 256 KiB 0.956-0.969 against 0.939-0.941 for the kernel, best of 7 in
/// gpuxfer-probe-batch-streams on two H100 hosts; 1 MiB 0.97 against 0.93);
inline constexpr std::size_t kernel_store_max_row = std::size_t{256} << 10;
/// and when it loads from host memory (H2D, PCIe reads: 0.58 or 0.90 of the link at 16 KiB rows on two
/// H100 hosts, against 0.38-0.42 for one batch and 0.10-0.18 for one split over streams; from 32 KiB
/// the split batch, 0.89 at 32 KiB on 8 streams; docs/BLOCKS.md).
inline constexpr std::size_t kernel_load_max_row = std::size_t{32} << 10;

/// One cudaMemcpyBatchAsync starts its copies only once the call returns, the call costs about 0.4 us a
/// row, and the copy engines work on several copies at once only from several streams: so a batch of long
/// rows is cut into parts on several streams (batch_cut). 64 KiB rows in random order, host -> device on an
/// H100: 0.73 of the link as one batch, 0.94 as 8 parts on 8 streams. Rows of 16 KiB and less lose from
/// the split when they read host memory (H2D 16 KiB: 0.39 on one stream, 0.11 on 8), so a batch is split
/// only from this long a row on average (32 KiB: 0.57 on one stream, 0.89 on 8),
inline constexpr std::size_t batch_split_min_row = std::size_t{32} << 10;
/// over this many streams at most (the caller's and side streams), each part of at least
/// batch_min_part_rows rows.
inline constexpr std::size_t batch_streams = 8;
inline constexpr std::size_t batch_min_part_rows = 16;

/// How many streams a batch of @p rows rows of @p total bytes in all is split over (1: not split).
[[nodiscard]] std::size_t batch_parts(std::size_t total, std::size_t rows) noexcept;

/// A batch split into batch_streams parts is not cut equally: its first three parts hold 1/64, 1/32 and
/// 1/16 of the rows and the other five share the rest. The link idles until the first part is queued
/// and a stream's copies join the others' only once its part is queued; small first parts start the
/// link at once and the streams come in while the first ones work (64 KiB rows in random order on an
/// H100, best of 7 in gpuxfer-probe-batch-streams: 0.969 / 0.972 of the link host -> device / device ->
/// host, against 0.925 / 0.940 for 8 equal parts; 32 KiB 0.953 / 0.903 against 0.950 / 0.745).
/// Part @p j (0 to @p parts) of a batch of @p rows rows split into @p parts parts starts at this row;
/// part @p parts at @p rows. Fewer than batch_streams parts are equal.
/// (Inline: the bench and gpuxfer-probe-batch-streams cut their raw batches with it too.)
[[nodiscard]] constexpr std::size_t batch_cut(std::size_t rows, std::size_t parts, std::size_t j) noexcept {
  if (j >= parts) return rows;
  if (parts < batch_streams) return rows * j / parts;
  constexpr std::size_t ramp_parts = 3;
  const std::size_t ramp[] = {0, rows / 64, rows / 64 + rows / 32, rows / 64 + rows / 32 + rows / 16};
  if (j <= ramp_parts) return ramp[j];
  return ramp[ramp_parts] + (rows - ramp[ramp_parts]) * (j - ramp_parts) / (parts - ramp_parts);
}

/// The path for @p requested given the plan: @p total bytes in @p rows contiguous rows; @p kernel_ok
/// whether the device maps the host side; @p loads_host whether the kernel would read host memory (H2D);
/// @p batch_ok whether cudaMemcpyBatchAsync may run (not on the legacy stream, not while capturing).
[[nodiscard]] BlockPath choose_block_path(BlockPath requested, std::size_t total, std::size_t rows,
                                          bool kernel_ok, bool loads_host, bool batch_ok) noexcept;

}  // namespace gpuxfer::detail
