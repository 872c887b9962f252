// The flow of --ranks. Every rank joins the Communicator, the ranks exchange where they are and measure
// each operation at each size together; then the communicator is closed and the other ranks exit, so
// that rank 0 measures the single-process references with nothing else on the GPUs (a rank waiting in a
// collective would keep an NCCL kernel on its GPU, which the references' own kernels would share).
#include "ranks.hpp"

#include <algorithm>
#include <exception>
#include <iostream>
#include <optional>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <gpuxfer/communicator.hpp>
#include <gpuxfer/error.hpp>
#include <gpuxfer/options.hpp>
#include <gpuxfer/testing/format.hpp>

#include "../runner.hpp"
#include "rank_bench.hpp"
#include "rank_ops.hpp"

namespace gpuxfer::bench {
namespace {

// What the ranks measured of one operation: the job's stats per size, and the failure that ended it.
struct RankResult {
  const RankOp* op = nullptr;
  std::vector<std::pair<std::size_t, Stats>> rows;
  std::optional<std::pair<std::size_t, std::string>> failure;
};

std::string what_failed(const std::exception& e) {
  if (const auto* error = dynamic_cast<const Error*>(&e))
    return std::string(to_string(error->code())) + ": " + error->message();
  return e.what();
}

// Every operation at every size, on every rank. The first failure ends the ranks' part: after one, the
// ranks may no longer agree on what comes next (and an aborted communicator refuses everything).
std::vector<RankResult> measure_ranks(RankBench& bench, const std::vector<const RankOp*>& ops) {
  std::vector<RankResult> results;
  for (const RankOp* op : ops) {
    results.push_back({op, {}, std::nullopt});
    for (const std::size_t size : bench.options().sizes) {
      try {
        results.back().rows.emplace_back(size, op->run(bench, size));
      } catch (const std::exception& e) {
        results.back().failure.emplace(size, what_failed(e));
        std::cerr << "gpuxfer-bench: rank " << bench.rank() << ": " << op->spec.name << " at "
                  << format_bytes(size) << ": FAILED: " << results.back().failure->second << '\n';
        return results;
      }
    }
  }
  return results;
}

std::optional<int> ordinal_of(const std::string& pci_bus_id) {
  int ordinal = -1;
  if (cudaDeviceGetByPCIBusId(&ordinal, pci_bus_id.c_str()) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return std::nullopt;
  }
  return ordinal;
}

// The machine as the ranks saw it, for a job whose references could not run in one process.
RunnerInfo ranks_runner_info(const std::vector<RankPlace>& places) {
  RunnerInfo info;
  for (const RankPlace& p : places) {
    info.ordinals.push_back(p.device);
    info.names.push_back(p.name);
    info.pci_bus_ids.push_back(p.pci_bus_id);
  }
  info.date = utc_now();
  int nccl = 0;
  static_cast<void>(ncclGetVersion(&nccl));
  info.nccl_version = testing::nccl_version_string(nccl);
  static_cast<void>(cudaRuntimeGetVersion(&info.cuda_runtime));
  static_cast<void>(cudaDriverGetVersion(&info.cuda_driver));
  const Options options = Options::from_env();
  info.host_threads = options.host_threads;
  info.chunk_bytes = options.chunk_bytes;
  return info;
}

void add_rank_rows(Report& report, const RankResult& result) {
  const OpSpec& spec = result.op->spec;
  report.begin(spec);
  for (const auto& [size, stats] : result.rows) report.add(spec, size, stats);
  if (result.failure) report.fail(spec, result.failure->first, result.failure->second);
  report.end(spec);
}

// Rank 0, after the ranks' part: the references on the same GPUs, then every table, the headline, the JSON.
int report_ranks(const BenchOptions& options, const std::vector<RankPlace>& places,
                 const std::vector<RankResult>& results) {
  std::vector<const RankOp*> ops;
  for (const RankResult& r : results) ops.push_back(r.op);
  const std::vector<OpSpec> references = rank_references(ops);
  ReferencePlan plan = plan_references(places, ordinal_of);

  std::shared_ptr<MultiGpuManager> manager;
  std::unique_ptr<Bench> bench;
  if (plan.why_not.empty()) {
    // The ranks' rows are measured already: a reference side that cannot start waives the references
    // (saying why) rather than losing them.
    try {
      Options manager_options = Options::from_env();
      manager_options.devices = plan.ordinals;
      manager_options.min_devices = 1;
      manager = MultiGpuManager::create(std::move(manager_options));
      bench = std::make_unique<Bench>(options, manager);
    } catch (const std::exception& e) {
      plan = {{}, "rank 0 could not open the GPUs in one process: " + what_failed(e)};
      bench.reset();
      manager.reset();
    }
  }
  const RunnerInfo info = manager ? runner_info(*manager) : ranks_runner_info(places);
  Report report(std::cout, places.size(), options.sizes);
  std::vector<const OpSpec*> listed;
  for (const OpSpec& r : references) listed.push_back(&r);
  for (const RankOp* op : ops) listed.push_back(&op->spec);
  report.header(info, options, listed);
  for (const std::string& line : ranks_lines(places, plan, options.warmup, options.iters))
    std::cout << line << '\n';

  std::vector<std::string> measured;
  for (const RankResult& result : results) {
    const std::string& name = result.op->spec.ceiling.front();
    if (std::find(measured.begin(), measured.end(), name) == measured.end()) {
      measured.push_back(name);
      const OpSpec& reference = *std::find_if(references.begin(), references.end(),
                                              [&](const OpSpec& r) { return r.name == name; });
      if (bench) {
        run_op(*bench, report, reference);
      } else {
        report.waive(reference, plan.why_not);
      }
    }
    add_rank_rows(report, result);
  }
  report.finish();

  if (!options.json_path.empty()) {
    nlohmann::ordered_json doc = report.json(info, options);
    doc["mode"] = "ranks";
    doc["ranks"] = ranks_json(places, plan);
    if (!write_json(options.json_path, doc)) return 1;
  }
  return report.wrong() == 0 && report.failures() == 0 ? 0 : 1;
}

}  // namespace

int run_ranks(const BenchOptions& options) {
  const std::vector<const RankOp*> ops = select_rank_ops(options.ops);
  if (options.list) {
    for (const RankOp* op : ops) {
      std::cout << op->spec.name << " [against " << op->spec.ceiling.front() << "]: " << op->spec.what
                << '\n';
    }
    return 0;
  }
  std::optional<Communicator> comm;
  try {
    comm.emplace(Communicator::from_environment());
  } catch (const Error& e) {
    if (e.code() != Errc::no_device) throw;
    std::cerr << "gpuxfer-bench: no_device: " << e.message() << '\n';
    return exit_no_device;
  }
  std::vector<RankPlace> places;
  std::vector<RankResult> results;
  {
    RankBench bench(options, *comm);
    places = exchange_places(bench);
    results = measure_ranks(bench, ops);
  }
  const int rank = comm->rank();
  comm.reset();  // collective: every rank closes the communicator; then rank 0 has the GPUs to itself
  const bool failed = !results.empty() && results.back().failure.has_value();
  if (rank != 0) return failed ? 1 : 0;
  return report_ranks(options, places, results);
}

}  // namespace gpuxfer::bench
