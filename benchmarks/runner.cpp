#include "runner.hpp"

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <fstream>
#include <iostream>

#include <cuda_runtime_api.h>
#include <nvtx3/nvtx3.hpp>

#include <gpuxfer/error.hpp>
#include <gpuxfer/testing/format.hpp>

#include "runtime/cuda_check.hpp"

namespace gpuxfer::bench {

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

namespace {

// A line of sysfs file @p path, or empty.
std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::string pcie_link(const std::string& pci_bus_id, const std::string& sysfs) {
  std::string id = pci_bus_id;
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string dir = sysfs + "/bus/pci/devices/" + id + "/";
  const std::string speed = read_line(dir + "current_link_speed");  // "32.0 GT/s PCIe"
  const std::string width = read_line(dir + "current_link_width");  // "16"
  if (speed.empty() || width.empty()) return "PCIe link unknown (no " + dir + "current_link_*)";
  const double gts = std::atof(speed.c_str());
  int gen = 0;
  for (const double rate : {2.5, 5.0, 8.0, 16.0, 32.0, 64.0}) {
    ++gen;
    if (gts > rate - 0.1 && gts < rate + 0.1) break;
    if (rate == 64.0) gen = 0;
  }
  const std::string gts_text = speed.substr(0, speed.find(' '));
  return (gen != 0 ? "PCIe gen" + std::to_string(gen) : "PCIe") + " x" + width + " (" + gts_text + " GT/s)";
}

RunnerInfo runner_info(const MultiGpuManager& m) {
  RunnerInfo info;
  for (const DeviceInfo& d : m.devices()) {
    info.ordinals.push_back(d.ordinal);
    info.names.push_back(d.name);
    info.pci_bus_ids.push_back(d.pci_bus_id);
    info.pcie.push_back(pcie_link(d.pci_bus_id));
  }
  for (std::size_t a = 0; a < m.device_count(); ++a) {
    info.links.emplace_back();
    for (std::size_t b = 0; b < m.device_count(); ++b) info.links[a].emplace_back(to_string(m.link(a, b)));
  }
  info.date = utc_now();
  info.nccl_version = testing::nccl_version_string(m.nccl_version());
  static_cast<void>(cudaRuntimeGetVersion(&info.cuda_runtime));
  static_cast<void>(cudaDriverGetVersion(&info.cuda_driver));
  info.host_threads = m.options().host_threads;
  info.chunk_bytes = m.options().chunk_bytes;
  return info;
}

std::string no_device_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return gpuxfer::detail::describe_cuda_error(err);
  }
  return count == 0 ? "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)" : "";
}

bool write_json(const std::string& path, const nlohmann::ordered_json& doc) {
  std::ofstream file(path);
  file << doc.dump(1) << '\n';
  if (!file) {
    std::cerr << "gpuxfer-bench: cannot write " << path << '\n';
    return false;
  }
  return true;
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

}  // namespace gpuxfer::bench
