// gpuxfer-bench --ranks: the cross-process operations, one rank per process.
#pragma once

#include "../options.hpp"

namespace gpuxfer::bench {

/// Runs the cross-process bench as this process's rank of the job its launch environment describes
/// (gpuxfer launch, torchrun, srun, mpirun; alone, a world of one). Every rank measures the operations
/// together; then rank 0 alone measures their single-process references on the same GPUs (when every
/// rank is on its host), prints the tables and the headline and writes the JSON. Returns the exit code:
/// 0 when every byte was right and nothing failed, 1 otherwise, exit_no_device without a CUDA device for
/// this rank (after one line saying why).
[[nodiscard]] int run_ranks(const BenchOptions& options);

}  // namespace gpuxfer::bench
