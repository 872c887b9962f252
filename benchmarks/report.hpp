// The bench's output: a table per operation as nccl-tests prints them (size, bytes, time, GB/s, ceiling,
// ratio, #wrong), a summary line per operation, the headline ratios against issue 3's targets, and the
// same numbers as JSON.
#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops.hpp"
#include "options.hpp"
#include "timing.hpp"

namespace gpuxfer::bench {

/// The machine and software a run measured.
struct RunnerInfo {
  std::vector<int> ordinals;
  std::vector<std::string> names;
  std::vector<std::string> pci_bus_ids;
  std::vector<std::string> pcie;  ///< each device's host link as sysfs reports it: "PCIe gen5 x16 (32.0 GT/s)"
  std::vector<std::vector<std::string>> links;  ///< links[a][b]: "self", "nvlink", "pcie_peer", "host_staged"
  std::string date;                             ///< UTC, ISO 8601
  std::string nccl_version;                     ///< "2.28.3" or "none"
  int cuda_runtime = 0;
  int cuda_driver = 0;
  unsigned host_threads = 0;
  std::size_t chunk_bytes = 0;
};

/// One operation at one size.
struct Row {
  const OpSpec* op = nullptr;
  std::size_t size = 0;   ///< bytes per device (or per piece, for fixed-size operations)
  std::size_t bytes = 0;  ///< bytes counted for GB/s
  Stats stats;
  double gbps = 0;
  std::optional<double> ceiling;  ///< GB/s of the ceiling at the same size
  std::string ceiling_op;         ///< its name ("min(a, b)" for several)
  std::optional<double> ratio;    ///< gbps / ceiling
  std::optional<double> bound;    ///< GB/s of OpSpec::bound at the same size
  std::optional<double> stream_bound;  ///< GB/s of OpSpec::stream_bound at the same size
  std::optional<double> overlap_bound;  ///< GB/s of OpSpec::overlap_bound at the same size
};

class Report {
 public:
  Report(std::ostream& out, std::size_t devices, std::vector<std::size_t> sizes);

  /// The run's header: machine, sizes, samples, how bytes and time are counted.
  void header(const RunnerInfo& info, const BenchOptions& options, const std::vector<const OpSpec*>& ops);
  /// Starts an operation; its table header is printed with its first row (not at all when it is waived).
  void begin(const OpSpec& op);
  /// A measured size: computes GB/s, the ceiling and the ratio from the rows so far, prints the line.
  void add(const OpSpec& op, std::size_t size, const Stats& stats);
  /// The operation cannot run here; @p why says what is missing.
  void waive(const OpSpec& op, const std::string& why);
  /// The operation failed at @p size with @p what (an exception); the run will exit non-zero.
  void fail(const OpSpec& op, std::size_t size, const std::string& what);
  /// The operation's summary line (at the headline size).
  void end(const OpSpec& op);
  /// The headline: every ratio at the headline size against its target; then the run's verdict.
  void finish();

  /// Everything, as JSON:
  ///   {"schema": "gpuxfer-bench/1", "convention": "...",
  ///    "runner": {"devices", "ordinals", "names", "pci_bus_ids", "links", "date", "gpuxfer_version",
  ///               "nccl_version", "cuda_runtime", "cuda_driver", "host_threads", "chunk_bytes",
  ///               "iters", "warmup", "sizes"},
  ///    "ceilings": {name: {"what", "bytes_rule", "rows": [{"size", "bytes", "time_us", "gbps", "wrong"}]}},
  ///    "results": [{"op", "kind", "size", "bytes", "time_us", "min_us", "max_us", "gbps", "ceiling",
  ///                 "ceiling_op", "ratio", "bound", "bound_op", "wrong", "samples",
  ///                 ("interleaved": {"baseline_us", "pick", "rounds": [{"time_us", "baseline_us"}]})}],
  ///    "waived": [{"op", "why"}], "failed": [{"op", "what"}],
  ///    "headline": {"size", "ratios": {op: ratio}, "entries": [{"op", "vs", "size", "gbps",
  ///                 "ceiling", "ratio", "target", "met", ("time_x", "time_target")}]},
  ///    "wrong": total wrong bytes}
  /// "results" holds every operation that is not a ceiling; null where a value does not exist.
  /// "interleaved" is there for an operation timed sample by sample against its raw baseline
  /// (measure_interleaved): its time_us and ceiling come from the round it picks, not from the ceiling
  /// op's own row; where it outran a raw ceiling there, from the fastest that ceiling went in the run.
  [[nodiscard]] nlohmann::ordered_json json(const RunnerInfo& info, const BenchOptions& options) const;

  [[nodiscard]] std::size_t wrong() const noexcept { return wrong_; }
  [[nodiscard]] std::size_t failures() const noexcept { return failures_; }

 private:
  void print_header(const OpSpec& op);
  [[nodiscard]] const Row* find(const std::string& op, std::size_t size) const;
  /// The fastest GB/s of @p ceiling at @p size in the run so far: its own row, or the raw baseline of a
  /// row measured interleaved with it, in its fastest round (a disturbed sample of the ceiling is no
  /// bound). Null when none.
  [[nodiscard]] std::optional<double> fastest(const std::string& ceiling, std::size_t size) const;
  /// @p op's target with this run's device count (OpSpec::one_device_target on one device).
  [[nodiscard]] std::optional<double> target_of(const OpSpec& op) const;
  [[nodiscard]] std::size_t headline_size() const;
  [[nodiscard]] const Row* headline_row(const OpSpec& op) const;
  [[nodiscard]] nlohmann::ordered_json headline_json() const;

  std::ostream& out_;
  std::size_t devices_;
  std::vector<std::size_t> sizes_;
  std::vector<Row> rows_;
  std::vector<const OpSpec*> ops_;   // in the order they ran
  const OpSpec* pending_ = nullptr;  // begun, header not printed yet
  std::vector<std::pair<std::string, std::string>> waived_;
  std::vector<std::pair<std::string, std::string>> failed_;
  std::size_t wrong_ = 0;
  std::size_t failures_ = 0;
};

/// The ceiling of @p op by name: "ceiling_d2h", or "min(a, b)" for several; "" for none.
[[nodiscard]] std::string ceiling_name(const OpSpec& op);

/// "64 MiB", "4 KiB", "1.5 GiB".
[[nodiscard]] std::string format_bytes(std::size_t bytes);

}  // namespace gpuxfer::bench
