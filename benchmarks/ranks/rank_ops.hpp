// The cross-process operations of --ranks, each against its single-process reference, and the references
// themselves: gpuxfer's own operations in one process (all_ops()), and raw NCCL's all-gather in one
// process for the all-gather, which InterGpuTransfer does not have.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "../ops.hpp"

namespace gpuxfer::bench {

class RankBench;

/// One cross-process operation: what the report shows of it (spec: name, bytes, its single-process
/// reference as spec.ceiling, issue 11's target) and how every rank measures it.
struct RankOp {
  OpSpec spec;
  /// Measures the operation at @p size (collective: every rank calls it, in the same order).
  std::function<Stats(RankBench&, std::size_t size)> run;
};

/// Every cross-process operation, in run order.
[[nodiscard]] const std::vector<RankOp>& rank_ops();

/// The operations named in @p names, in run order; all of them when @p names is empty.
/// @throws Error(Errc::invalid_option) naming an unknown operation and the known ones
[[nodiscard]] std::vector<const RankOp*> select_rank_ops(const std::vector<std::string>& names);

/// The single-process references of @p ops, each once, in the order first needed. Each is a copy of the
/// operation it names with no ceiling, bound or target of its own: a reference, not a result ranked
/// against a ceiling of its own.
[[nodiscard]] std::vector<OpSpec> rank_references(const std::vector<const RankOp*>& ops);

}  // namespace gpuxfer::bench
