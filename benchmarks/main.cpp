// gpuxfer-bench: parses the command line, opens the devices, runs the selected operations (ceilings
// first), prints the tables and the headline, writes the JSON; with --ranks, the cross-process operations
// instead (ranks/). Exit codes: 0 when every byte was right and nothing failed, 1 otherwise, 2 without a
// CUDA device (after one line saying why).

#include <exception>
#include <iostream>
#include <string>
#include <variant>

#include <gpuxfer/error.hpp>
#include <gpuxfer/multi_gpu_manager.hpp>
#include <gpuxfer/options.hpp>

#include "bench.hpp"
#include "ops.hpp"
#include "options.hpp"
#include "ranks/ranks.hpp"
#include "report.hpp"
#include "runner.hpp"

namespace gpuxfer::bench {
namespace {

int run(int argc, char** argv) {
  std::variant<BenchOptions, int> parsed = parse_options(argc, argv);
  if (const int* code = std::get_if<int>(&parsed)) return *code;
  BenchOptions options = std::get<BenchOptions>(std::move(parsed));
  if (options.ranks) return run_ranks(options);
  const std::vector<const OpSpec*> ops = select_ops(options.ops);
  if (options.list) {
    for (const OpSpec& op : all_ops())
      std::cout << op.name << " [" << to_string(op.kind) << "]: " << op.what << '\n';
    return 0;
  }
  if (const std::string why = no_device_reason(); !why.empty()) {
    std::cerr << "gpuxfer-bench: no CUDA device: " << why << '\n';
    return exit_no_device;
  }

  Options manager_options = Options::from_env();
  if (manager_options.simulated_devices > 0) {
    // Simulated devices share their GPU's links and copy engines: their bandwidth means nothing.
    std::cerr << "gpuxfer-bench: GPUXFER_SIMULATED_DEVICES=" << manager_options.simulated_devices
              << " is set: simulated devices share one GPU's links, so no ratio measured on them means "
                 "anything; unset it to measure the real devices\n";
    return 1;
  }
  if (!options.devices.empty()) manager_options.devices = options.devices;
  manager_options.min_devices = 1;
  const auto manager = MultiGpuManager::create(std::move(manager_options));
  const RunnerInfo info = runner_info(*manager);
  Bench bench(options, manager);
  Report report(std::cout, bench.devices(), options.sizes);
  report.header(info, options, ops);
  for (const OpSpec* op : ops) run_op(bench, report, *op);
  report.finish();

  if (!options.json_path.empty() && !write_json(options.json_path, report.json(info, options))) return 1;
  return report.wrong() == 0 && report.failures() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace gpuxfer::bench

int main(int argc, char** argv) {
  try {
    return gpuxfer::bench::run(argc, argv);
  } catch (const gpuxfer::Error& e) {
    std::cerr << "gpuxfer-bench: " << gpuxfer::to_string(e.code()) << ": " << e.message() << '\n';
  } catch (const std::exception& e) {
    std::cerr << "gpuxfer-bench: " << e.what() << '\n';
  }
  return 1;
}
