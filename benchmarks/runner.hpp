// What both modes of the bench share around the measurements: the machine's description for the report,
// why there is no device, and one operation run over every size into the report.
#pragma once

#include <string>

#include <gpuxfer/multi_gpu_manager.hpp>

#include "bench.hpp"
#include "ops.hpp"
#include "report.hpp"

namespace gpuxfer::bench {

/// Exit code without a usable CUDA device (after one line saying why).
inline constexpr int exit_no_device = 2;

/// The current time, UTC, ISO 8601.
[[nodiscard]] std::string utc_now();

/// The devices, links, versions and options of @p manager.
[[nodiscard]] RunnerInfo runner_info(const MultiGpuManager& manager);

/// The PCIe link of the device at @p pci_bus_id ("0000:00:06.0") as sysfs reports it now, e.g. "PCIe gen5
/// x16 (32.0 GT/s)"; a sentence saying so when sysfs has no link files for it.
[[nodiscard]] std::string pcie_link(const std::string& pci_bus_id, const std::string& sysfs = "/sys");

/// Why there is no usable CUDA device, or an empty string when there is one.
[[nodiscard]] std::string no_device_reason();

/// Writes @p doc to @p path as the bench writes its JSON (indented, newline-terminated); false, after a
/// line saying so, when the file cannot be written.
[[nodiscard]] bool write_json(const std::string& path, const nlohmann::ordered_json& doc);

/// Runs @p op at every size of the run (or its fixed size) into @p report: waived when it cannot run
/// here, a failure per size that throws (the next size still runs).
void run_op(Bench& bench, Report& report, const OpSpec& op);

}  // namespace gpuxfer::bench
