// What --ranks decides without a GPU: where the ranks are, whether rank 0 can run the single-process
// references on the same GPUs, how one sample's times and wrong bytes of every rank make the job's, and
// how the ranks are described in the report and the JSON.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../timing.hpp"

namespace gpuxfer::bench {

/// One rank of the job: its host and its GPU as the rank sees it.
struct RankPlace {
  int rank = 0;
  int device = 0;          ///< CUDA ordinal in the rank's own process
  std::string host;        ///< gethostname()
  std::string pci_bus_id;  ///< cudaDeviceGetPCIBusId, e.g. "0000:19:00.0"
  std::string name;        ///< the device's name
};

/// The GPUs rank 0 runs the single-process references on: its own ordinals of the ranks' GPUs in rank
/// order, or (ordinals empty) why the references cannot run.
struct ReferencePlan {
  std::vector<int> ordinals;
  std::string why_not;
};

/// The ranks' GPUs as rank 0's ordinals: every rank must be on rank 0's host, each on a GPU of its own,
/// one that rank 0 can see (@p ordinal_of: the ordinal of a PCI bus id in rank 0's process, or nullopt).
[[nodiscard]] ReferencePlan plan_references(
    const std::vector<RankPlace>& places,
    const std::function<std::optional<int>(const std::string&)>& ordinal_of);

/// The job's sample from every rank's: the slowest rank's time (the operation is done when the last rank
/// returns) and the wrong bytes of all of them.
[[nodiscard]] Sample combine_samples(std::span<const Sample> per_rank);

/// The report's lines about the job: the ranks, how their rows are timed and verified, and where the
/// references ran (or why they did not). Each line starts with "# ".
[[nodiscard]] std::vector<std::string> ranks_lines(const std::vector<RankPlace>& places,
                                                   const ReferencePlan& plan, int warmup, int iters);

/// The JSON of the job: {"world_size", "places": [{"rank", "host", "device", "pci_bus_id", "name"}],
/// "timing", "references": {"ordinals", "why_not"}}.
[[nodiscard]] nlohmann::ordered_json ranks_json(const std::vector<RankPlace>& places,
                                                const ReferencePlan& plan);

}  // namespace gpuxfer::bench
