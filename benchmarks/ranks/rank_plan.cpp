#include "rank_plan.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace gpuxfer::bench {
namespace {

constexpr const char* timing_text =
    "cross-process rows: every rank waits at a barrier, then times its blocking call (steady_clock); a "
    "sample is the slowest rank's time";

std::string rank_name(const RankPlace& p) { return "rank " + std::to_string(p.rank); }

}  // namespace

ReferencePlan plan_references(const std::vector<RankPlace>& places,
                              const std::function<std::optional<int>(const std::string&)>& ordinal_of) {
  ReferencePlan plan;
  if (places.empty()) return {{}, "no ranks"};
  std::set<std::string> hosts;
  for (const RankPlace& p : places) hosts.insert(p.host);
  if (hosts.size() > 1) {
    return {{},
            "the ranks run on " + std::to_string(hosts.size()) +
                " hosts: one process can only drive the GPUs of its own host"};
  }
  std::map<std::string, int> seen;  // bus id -> the first rank on it
  for (const RankPlace& p : places) {
    const auto [first, fresh] = seen.emplace(p.pci_bus_id, p.rank);
    if (!fresh) {
      return {{},
              "ranks " + std::to_string(first->second) + " and " + std::to_string(p.rank) + " share GPU " +
                  p.pci_bus_id};
    }
    const std::optional<int> ordinal = ordinal_of(p.pci_bus_id);
    if (!ordinal) {
      return {{},
              rank_name(p) + "'s GPU " + p.pci_bus_id +
                  " is not visible to rank 0 (CUDA_VISIBLE_DEVICES differs between the ranks)"};
    }
    plan.ordinals.push_back(*ordinal);
  }
  return plan;
}

Sample combine_samples(std::span<const Sample> per_rank) {
  Sample job;
  for (const Sample& s : per_rank) {
    job.seconds = std::max(job.seconds, s.seconds);
    job.wrong += s.wrong;
  }
  return job;
}

std::vector<std::string> ranks_lines(const std::vector<RankPlace>& places, const ReferencePlan& plan,
                                     int warmup, int iters) {
  std::string where = "# ranks: " + std::to_string(places.size());
  for (const RankPlace& p : places) {
    where.append(p.rank == 0 ? ": [" : ", [");
    where += std::to_string(p.rank) + "] " + p.host + " device " + std::to_string(p.device) + " " + p.name +
             " (" + p.pci_bus_id + ")";
  }
  std::vector<std::string> lines{where};
  lines.push_back("# " + std::string(timing_text) + "; median of " + std::to_string(iters) +
                  " samples after " + std::to_string(warmup) +
                  " warm-up; data verified once per size (the first sample, before the warm-up: destinations "
                  "poisoned, patterns per rank and size)");
  if (plan.why_not.empty()) {
    std::string ordinals;
    for (const int o : plan.ordinals) {
      if (!ordinals.empty()) ordinals += ',';
      ordinals += std::to_string(o);
    }
    lines.push_back("# references: single-process gpuxfer (and raw NCCL) in rank 0's process on ordinals " +
                    ordinals + ", after the ranks' part; ratio = the rank row's GB/s / its reference's");
  } else {
    lines.push_back("# references: not run: " + plan.why_not);
  }
  return lines;
}

nlohmann::ordered_json ranks_json(const std::vector<RankPlace>& places, const ReferencePlan& plan) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const RankPlace& p : places) {
    list.push_back({{"rank", p.rank},
                    {"host", p.host},
                    {"device", p.device},
                    {"pci_bus_id", p.pci_bus_id},
                    {"name", p.name}});
  }
  return {{"world_size", places.size()},
          {"places", list},
          {"timing", timing_text},
          {"references",
           {{"ordinals", plan.ordinals},
            {"why_not",
             plan.why_not.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(plan.why_not)}}}};
}

}  // namespace gpuxfer::bench
