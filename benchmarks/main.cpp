// gpuxfer-bench: parses the command line, opens the devices, runs the selected operations (ceilings
// first), prints the tables and the headline, writes the JSON. Exit codes: 0 when every byte was right
// and nothing failed, 1 otherwise, 2 without a CUDA device (after one line saying why).

#include <chrono>
#include <ctime>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <variant>

#include <cuda_runtime_api.h>
#include <nvtx3/nvtx3.hpp>

#include <gpuxfer/error.hpp>
#include <gpuxfer/multi_gpu_manager.hpp>
#include <gpuxfer/options.hpp>

#include "bench.hpp"
#include "ops.hpp"
#include "options.hpp"
#include "report.hpp"

namespace gpuxfer::bench {
namespace {

constexpr int exit_no_device = 2;

// NCCL's version code (22803) as "2.28.3"; "none" for 0.
std::string nccl_version_string(int code) {
  if (code <= 0) return "none";
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

RunnerInfo runner_info(const MultiGpuManager& m) {
  RunnerInfo info;
  for (const DeviceInfo& d : m.devices()) {
    info.ordinals.push_back(d.ordinal);
    info.names.push_back(d.name);
    info.pci_bus_ids.push_back(d.pci_bus_id);
  }
  for (std::size_t a = 0; a < m.device_count(); ++a) {
    info.links.emplace_back();
    for (std::size_t b = 0; b < m.device_count(); ++b) info.links[a].emplace_back(to_string(m.link(a, b)));
  }
  info.date = utc_now();
  info.nccl_version = nccl_version_string(m.nccl_version());
  static_cast<void>(cudaRuntimeGetVersion(&info.cuda_runtime));
  static_cast<void>(cudaDriverGetVersion(&info.cuda_driver));
  info.host_threads = m.options().host_threads;
  info.chunk_bytes = m.options().chunk_bytes;
  return info;
}

// Why there is no usable CUDA device, or an empty string when there is one.
std::string no_device_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
  }
  return count == 0 ? "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)" : "";
}

void run_op(Bench& bench, Report& report, const OpSpec& op) {
  nvtx3::scoped_range range{op.name};
  if (op.waive != nullptr) {
    if (const std::optional<std::string> why = op.waive(bench)) {
      report.waive(op, *why);
      return;
    }
  }
  report.begin(op);
  const std::vector<std::size_t> sizes =
      op.fixed_size != 0 ? std::vector<std::size_t>{op.fixed_size} : bench.options().sizes;
  for (const std::size_t size : sizes) {
    try {
      const std::optional<Stats> stats = op.run(bench, size);
      if (!stats) {
        report.waive(op, op.waived_note.empty() ? "the operation cannot run here" : op.waived_note);
        return;
      }
      report.add(op, size, *stats);
    } catch (const Error& e) {
      report.fail(op, size, std::string(to_string(e.code())) + ": " + e.message());
    } catch (const std::exception& e) {
      report.fail(op, size, e.what());
    }
    std::cout.flush();
  }
  report.end(op);
}

int run(int argc, char** argv) {
  std::variant<BenchOptions, int> parsed = parse_options(argc, argv);
  if (const int* code = std::get_if<int>(&parsed)) return *code;
  BenchOptions options = std::get<BenchOptions>(std::move(parsed));
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
  if (!options.devices.empty()) manager_options.devices = options.devices;
  manager_options.min_devices = 1;
  const auto manager = MultiGpuManager::create(std::move(manager_options));
  const RunnerInfo info = runner_info(*manager);
  Bench bench(options, manager);
  Report report(std::cout, bench.devices(), options.sizes);
  report.header(info, options, ops);
  for (const OpSpec* op : ops) run_op(bench, report, *op);
  report.finish();

  if (!options.json_path.empty()) {
    std::ofstream file(options.json_path);
    file << report.json(info, options).dump(1) << '\n';
    if (!file) {
      std::cerr << "gpuxfer-bench: cannot write " << options.json_path << '\n';
      return 1;
    }
  }
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
