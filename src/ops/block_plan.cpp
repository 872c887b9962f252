// copy_blocks' plan: pure functions over the pairs and the layouts, tested on CPU.
#include "ops/block_plan.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include <gpuxfer/error.hpp>

namespace gpuxfer::detail {
namespace {

std::size_t mul(std::size_t a, std::size_t b, const char* what) {
  std::size_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    throw Error(Errc::invalid_argument,
                std::string("copy_blocks: the ") + what + " layout overflows the address space");
  }
  return out;
}

std::size_t add(std::size_t a, std::size_t b, const char* what) {
  std::size_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    throw Error(Errc::invalid_argument,
                std::string("copy_blocks: the ") + what + " layout overflows the address space");
  }
  return out;
}

[[noreturn]] void bad_pair(std::size_t k, std::int64_t s, std::int64_t d, const std::string& why) {
  throw Error(Errc::invalid_argument, "copy_blocks: pair " + std::to_string(k) + " (" + std::to_string(s) +
                                          ", " + std::to_string(d) + ") " + why + "; nothing was copied");
}

// Merges, in place, each run of @p runs into the one before it where it continues it on both sides.
void merge_runs(std::pmr::vector<BlockRun>& runs) {
  std::size_t kept = 0;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    if (kept > 0) {
      BlockRun& last = runs[kept - 1];
      if (runs[k].src == last.src + last.blocks && runs[k].dst == last.dst + last.blocks) {
        last.blocks += runs[k].blocks;
        continue;
      }
    }
    runs[kept++] = runs[k];
  }
  runs.resize(kept);
}

}  // namespace

BlockGeometry resolve_layout(const BlockLayout& side, std::size_t block_bytes, std::size_t layers,
                             bool writes, const char* what) {
  BlockGeometry g;
  g.blocks = side.blocks;
  g.layer_stride = side.layer_stride != 0 ? side.layer_stride : block_bytes;
  g.block_stride = side.block_stride != 0 ? side.block_stride : mul(layers, block_bytes, what);
  if (side.base == nullptr)
    throw Error(Errc::invalid_argument, std::string("copy_blocks: the ") + what + " base is null");
  if (g.blocks == 0) return g;
  // Block blocks - 1's layer layers - 1 ends the region.
  g.extent = add(add(mul(g.blocks - 1, g.block_stride, what), mul(layers - 1, g.layer_stride, what), what),
                 block_bytes, what);
  if (!writes) return g;
  // Two arrangements keep every piece apart: a block's layers side by side within the block (layers
  // inside blocks), or each layer holding every block (blocks inside layers).
  const bool layers_apart = layers == 1 || g.layer_stride >= block_bytes;
  const bool blocks_apart = g.blocks == 1 || g.block_stride >= block_bytes;
  const bool nested_layers =
      layers_apart && (g.blocks == 1 || g.block_stride >= (layers - 1) * g.layer_stride + block_bytes);
  const bool nested_blocks =
      blocks_apart && (layers == 1 || g.layer_stride >= (g.blocks - 1) * g.block_stride + block_bytes);
  if (!nested_layers && !nested_blocks) {
    throw Error(Errc::invalid_argument,
                std::string("copy_blocks: pieces of the ") + what + " layout overlap (block_stride " +
                    std::to_string(g.block_stride) + ", layer_stride " + std::to_string(g.layer_stride) +
                    ", block_bytes " + std::to_string(block_bytes) + ", " + std::to_string(layers) +
                    " layers): a destination must give every block's every layer bytes of its own");
  }
  return g;
}

std::pmr::vector<BlockRun> plan_block_runs(std::span<const std::int64_t> pairs, std::size_t src_blocks,
                                           std::size_t dst_blocks, std::pmr::memory_resource* memory) {
  const std::size_t n = pairs.size() / 2;
  std::pmr::vector<BlockRun> single(n, memory);
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t s = pairs[2 * k];
    const std::int64_t d = pairs[2 * k + 1];
    if (s < 0 || static_cast<std::uint64_t>(s) >= src_blocks) {
      bad_pair(k, s, d,
               "names a source block out of range (the source holds " + std::to_string(src_blocks) + ")");
    }
    if (d < 0 || static_cast<std::uint64_t>(d) >= dst_blocks) {
      bad_pair(k, s, d,
               "names a destination block out of range (the destination holds " + std::to_string(dst_blocks) +
                   ")");
    }
    single[k] = {static_cast<std::size_t>(s), static_cast<std::size_t>(d), 1};
  }
  // One writer per destination block: a bitmap where the destination is of a sane size, else a sort.
  if (dst_blocks <= (std::size_t{1} << 28)) {
    std::pmr::vector<std::uint64_t> seen((dst_blocks + 63) / 64, 0, memory);
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t d = single[k].dst;
      if ((seen[d / 64] >> (d % 64) & 1) != 0) {
        bad_pair(k, pairs[2 * k], pairs[2 * k + 1], "writes a destination block that an earlier pair writes");
      }
      seen[d / 64] |= std::uint64_t{1} << (d % 64);
    }
  } else {
    std::pmr::vector<std::size_t> order(n, memory);
    for (std::size_t k = 0; k < n; ++k) order[k] = k;
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return single[a].dst < single[b].dst; });
    for (std::size_t i = 1; i < n; ++i) {
      if (single[order[i]].dst == single[order[i - 1]].dst) {
        const std::size_t k = std::max(order[i], order[i - 1]);
        bad_pair(k, pairs[2 * k], pairs[2 * k + 1], "writes a destination block that another pair writes");
      }
    }
  }
  merge_runs(single);
  return single;
}

bool destination_order_pays(std::size_t given_runs, std::size_t sorted_runs) noexcept {
  return sorted_runs < given_runs && (given_runs - sorted_runs) * destination_order_min_gain >= given_runs;
}

std::pmr::vector<BlockRun> runs_in_destination_order(std::span<const BlockRun> runs, std::size_t dst_blocks,
                                                     std::pmr::memory_resource* memory) {
  const auto by_dst = [](const BlockRun& a, const BlockRun& b) { return a.dst < b.dst; };
  std::pmr::vector<BlockRun> ordered(memory);
  if (dst_blocks > 4 * runs.size() + 4096) {  // sparse: a sort
    ordered.assign(runs.begin(), runs.end());
    std::sort(ordered.begin(), ordered.end(), by_dst);
  } else {  // dense: placed by the index of their first destination block, which no other run writes
    constexpr std::size_t none = SIZE_MAX;
    std::pmr::vector<std::size_t> at(dst_blocks, none, memory);
    for (std::size_t k = 0; k < runs.size(); ++k) at[runs[k].dst] = k;
    ordered.reserve(runs.size());
    for (const std::size_t k : at) {
      if (k != none) ordered.push_back(runs[k]);
    }
  }
  merge_runs(ordered);
  return ordered;
}

std::pmr::vector<BlockPiece> block_pieces(std::span<const BlockRun> runs, const BlockGeometry& src,
                                          const BlockGeometry& dst, std::size_t block_bytes,
                                          std::size_t layers, std::pmr::memory_resource* memory) {
  // A block's layers are one contiguous piece on both sides when they lie back to back.
  const bool layers_joined =
      layers == 1 || (src.layer_stride == block_bytes && dst.layer_stride == block_bytes);
  const std::size_t width = layers_joined ? layers * block_bytes : block_bytes;
  const std::size_t parts = layers_joined ? 1 : layers;
  std::pmr::vector<BlockPiece> pieces(memory);
  pieces.reserve(runs.size() * parts);
  for (const BlockRun& r : runs) {
    for (std::size_t l = 0; l < parts; ++l) {
      BlockPiece p;
      p.src_offset = r.src * src.block_stride + l * src.layer_stride;
      p.dst_offset = r.dst * dst.block_stride + l * dst.layer_stride;
      if (r.blocks == 1 || (src.block_stride == width && dst.block_stride == width)) {
        p.width = r.blocks * width;  // the run's blocks back to back on both sides: one plain copy
      } else {
        p.width = width;
        p.height = r.blocks;
        p.src_pitch = src.block_stride;
        p.dst_pitch = dst.block_stride;
      }
      pieces.push_back(p);
    }
  }
  return pieces;
}

std::pmr::memory_resource* plan_memory() {
  // Few blocks a chunk: a plan holds few vectors at once.
  thread_local std::pmr::unsynchronized_pool_resource pool(
      std::pmr::pool_options{.max_blocks_per_chunk = 4, .largest_required_pool_block = std::size_t{4} << 20});
  return &pool;
}

std::size_t row_count(std::span<const BlockPiece> pieces) noexcept {
  std::size_t rows = 0;
  for (const BlockPiece& p : pieces) rows += p.height;
  return rows;
}

std::size_t batch_parts(std::size_t total, std::size_t rows) noexcept {
  if (rows == 0 || total / rows < batch_split_min_row) return 1;
  return std::clamp<std::size_t>(rows / batch_min_part_rows, 1, batch_streams);
}

BlockPath choose_block_path(BlockPath requested, std::size_t total, std::size_t rows, bool kernel_ok,
                            bool loads_host, bool batch_ok) noexcept {
  if (requested != BlockPath::automatic) return requested;
  const std::size_t row = rows == 0 ? total : total / rows;
  if (row >= copy_engine_min_row) return BlockPath::copy_engine;
  if (kernel_ok && row < (loads_host ? kernel_load_max_row : kernel_store_max_row)) return BlockPath::kernel;
  return batch_ok ? BlockPath::batch : BlockPath::copy_engine;
}

}  // namespace gpuxfer::detail
