#include "report.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include <gpuxfer/testing/format.hpp>
#include <gpuxfer/version.hpp>

namespace gpuxfer::bench {
namespace {

using json_t = nlohmann::ordered_json;

constexpr std::size_t headline_bytes = std::size_t{256} << 20;

constexpr const char* convention =
    "GB/s = bytes / time / 1e9. bytes: gathers = size per device x devices (total bytes moved); broadcasts = "
    "the payload size (bytes / time); copies = size. ratio = GB/s / ceiling GB/s at the same size, same run. "
    "time: gpuxfer and naive operations by steady_clock around the blocking call; raw ceilings by CUDA "
    "events, "
    "streams held behind a spin kernel until every copy is queued; median of the samples.";

std::string fixed(double v, int digits) { return testing::format_fixed(v, digits); }

std::string opt(const std::optional<double>& v, int digits) { return v ? fixed(*v, digits) : "-"; }

json_t opt_json(const std::optional<double>& v) { return v ? json_t(*v) : json_t(); }

// An interleaved measurement's rounds: the baseline's time (the ceiling's) in the round the row reports,
// and each round's two medians.
json_t interleaved_json(const Stats& stats) {
  json_t rounds = json_t::array();
  for (const Round& r : stats.rounds) {
    rounds.push_back({{"time_us", r.median_s * 1e6}, {"baseline_us", r.baseline_s * 1e6}});
  }
  return {{"baseline_us", stats.baseline_s.value_or(0) * 1e6}, {"pick", "best round"}, {"rounds", rounds}};
}

// The GB/s of an interleaved measurement's baseline in its fastest round; 0 for a row measured alone.
double baseline_gbps(const Stats& stats, std::size_t bytes) {
  double fastest_s = stats.baseline_s.value_or(0);
  for (const Round& r : stats.rounds) {
    if (r.baseline_s > 0 && (fastest_s <= 0 || r.baseline_s < fastest_s)) fastest_s = r.baseline_s;
  }
  return fastest_s > 0 ? static_cast<double>(bytes) / fastest_s / 1e9 : 0;
}

// The spread of a row's samples: (slowest - fastest) / median.
double spread_of(const Stats& stats) {
  return stats.median_s > 0 ? (stats.max_s - stats.min_s) / stats.median_s : 0;
}

std::string target_text(const OpSpec& op, const std::optional<double>& target) {
  if (!target) return "-";
  if (op.time_target) return "time <= " + fixed(1.0 / *target, 2) + " x";
  return ">= " + fixed(*target, 2);
}

// Above this ratio to a raw copy of the same bytes, an operation's time or its ceiling's is wrong: no
// library call moves bytes faster than the copy engine's own copy of them.
constexpr double ceiling_tolerance = 1.03;

// Whether @p op's ceiling bounds it on @p devices devices: every one a raw copy (not another gpuxfer
// operation or a baseline) and OpSpec::bounded saying it bounds there.
bool raw_ceiling(const OpSpec& op, std::size_t devices) {
  if (op.ceiling.empty() || op.bounded == Bounded::never) return false;
  if (op.bounded == Bounded::one_device && devices > 1) return false;
  const std::vector<OpSpec>& ops = all_ops();
  return std::all_of(op.ceiling.begin(), op.ceiling.end(), [&](const std::string& name) {
    const auto it = std::find_if(ops.begin(), ops.end(), [&](const OpSpec& o) { return o.name == name; });
    return it != ops.end() && it->kind == Kind::ceiling;
  });
}

}  // namespace

std::string ceiling_name(const OpSpec& op) {
  std::string names;
  for (const std::string& c : op.ceiling) names += (names.empty() ? "" : ", ") + c;
  return op.ceiling.size() > 1 ? "min(" + names + ")" : names;
}

std::string format_bytes(std::size_t bytes) { return testing::format_bytes(bytes); }

Report::Report(std::ostream& out, std::size_t devices, std::vector<std::size_t> sizes)
    : out_(out), devices_(devices), sizes_(std::move(sizes)) {}

void Report::header(const RunnerInfo& info, const BenchOptions& options,
                    const std::vector<const OpSpec*>& ops) {
  out_ << "# gpuxfer-bench " << version_string << ", " << info.date << '\n';
  out_ << "# devices: " << info.ordinals.size();
  for (std::size_t d = 0; d < info.ordinals.size(); ++d) {
    out_ << (d == 0 ? ": " : ", ") << "[" << d << "] ordinal " << info.ordinals[d] << " " << info.names[d]
         << " (" << info.pci_bus_ids[d] << ", " << info.pcie[d] << ")";
  }
  out_ << '\n';
  for (std::size_t a = 0; a < info.links.size(); ++a) {
    for (std::size_t b = a + 1; b < info.links.size(); ++b)
      out_ << "# link " << a << "-" << b << ": " << info.links[a][b] << '\n';
  }
  out_ << "# NCCL " << info.nccl_version << ", CUDA runtime " << info.cuda_runtime << ", driver "
       << info.cuda_driver << "; gpuxfer host_threads " << info.host_threads << ", chunk "
       << format_bytes(info.chunk_bytes) << '\n';
  out_ << "# sizes per device: " << format_bytes(sizes_.front()) << " .. " << format_bytes(sizes_.back())
       << " (" << sizes_.size() << " sizes); warm-up " << options.warmup << ", median of " << options.iters
       << " samples; every sample's data verified (pattern per device and sample, destinations poisoned)\n";
  out_ << "# " << convention << '\n';
  out_ << "# operations:";
  for (const OpSpec* op : ops) out_ << ' ' << op->name;
  out_ << '\n';
}

void Report::begin(const OpSpec& op) {
  if (std::find(ops_.begin(), ops_.end(), &op) == ops_.end()) ops_.push_back(&op);
  pending_ = &op;
}

void Report::print_header(const OpSpec& op) {
  if (pending_ != &op) return;
  pending_ = nullptr;
  out_ << "#\n# " << op.name << " [" << to_string(op.kind) << "]: " << op.what << '\n';
  out_ << "#   bytes = " << op.bytes.text;
  if (!op.ceiling.empty()) out_ << "; ceiling = " << ceiling_name(op);
  if (const std::optional<double> target = target_of(op)) out_ << "; target " << target_text(op, target);
  out_ << '\n';
  char line[160];
  std::snprintf(line, sizeof line, "# %12s %13s %12s %10s %10s %8s %8s\n", "size", "bytes", "time(us)",
                "GB/s", "ceiling", "ratio", "#wrong");
  out_ << line;
}

std::optional<double> Report::target_of(const OpSpec& op) const {
  return devices_ == 1 && op.one_device_target ? op.one_device_target : op.target;
}

const Row* Report::find(const std::string& op, std::size_t size) const {
  for (const Row& r : rows_) {
    if (r.op->name == op && r.size == size) return &r;
  }
  return nullptr;
}

std::optional<double> Report::fastest(const std::string& ceiling, std::size_t size) const {
  std::optional<double> best;
  const auto take = [&](double gbps) {
    if (gbps > 0) best = std::max(best.value_or(0), gbps);
  };
  for (const Row& r : rows_) {
    if (r.size != size) continue;
    if (r.op->name == ceiling) take(r.gbps);
    const bool baseline_is_it = r.op->ceiling.size() == 1 && r.op->ceiling.front() == ceiling;
    if (baseline_is_it) take(baseline_gbps(r.stats, r.bytes));
  }
  return best;
}

void Report::add(const OpSpec& op, std::size_t size, const Stats& stats) {
  Row row;
  row.op = &op;
  row.size = size;
  row.bytes = op.bytes.count(size, devices_);
  row.stats = stats;
  row.gbps = stats.median_s > 0 ? static_cast<double>(row.bytes) / stats.median_s / 1e9 : 0;
  if (!op.ceiling.empty()) {
    row.ceiling_op = ceiling_name(op);
    std::optional<double> lowest;
    bool all = true;
    for (const std::string& c : op.ceiling) {
      const std::optional<double> best = fastest(c, size);
      all = all && best.has_value();
      if (all) lowest = lowest ? std::min(*lowest, *best) : *best;
    }
    if (all && lowest) row.ceiling = lowest;
  }
  // Measured interleaved with its own baseline: that baseline, in the round reported, is the ceiling (an
  // op with no ceiling, such as a --ranks reference, has none either way). A raw copy cannot be outrun:
  // where the operation outran it, that round's copies were disturbed, and the fastest the ceiling went
  // in the run (this row's other rounds included) bounds the operation instead.
  if (!op.ceiling.empty() && stats.baseline_s && *stats.baseline_s > 0) {
    const double own = static_cast<double>(row.bytes) / *stats.baseline_s / 1e9;
    const bool outran = row.gbps > own && raw_ceiling(op, devices_);
    row.ceiling = outran ? std::max(row.ceiling.value_or(0), baseline_gbps(stats, row.bytes)) : own;
  }
  if (row.ceiling) row.ratio = row.gbps / *row.ceiling;
  if (!op.bound.empty()) {
    if (const Row* b = find(op.bound, size)) row.bound = b->gbps;
  }
  if (!op.stream_bound.empty()) {
    if (const Row* b = find(op.stream_bound, size)) row.stream_bound = b->gbps;
  }
  if (!op.overlap_bound.empty()) {
    if (const Row* b = find(op.overlap_bound, size)) row.overlap_bound = b->gbps;
  }
  wrong_ += stats.wrong;
  print_header(op);
  const bool above = row.ratio && *row.ratio > ceiling_tolerance && raw_ceiling(op, devices_);
  if (above) {
    ++failures_;
    failed_.emplace_back(op.name, format_bytes(size) + ": " + fixed(*row.ratio, 3) + " x its raw ceiling " +
                                      row.ceiling_op + ", above " + fixed(ceiling_tolerance, 2) +
                                      ": the ceiling or the timing is wrong");
  }
  char line[240];
  std::snprintf(line, sizeof line, "  %12zu %13zu %12.2f %10.2f %10s %8s %8zu%s\n", size, row.bytes,
                stats.median_s * 1e6, row.gbps, opt(row.ceiling, 2).c_str(), opt(row.ratio, 3).c_str(),
                stats.wrong,
                stats.wrong != 0 ? "  WRONG DATA" : (above ? "  ABOVE ITS RAW CEILING: a measurement error" : ""));
  out_ << line;
  rows_.push_back(std::move(row));
}

void Report::waive(const OpSpec& op, const std::string& why) {
  if (std::find(ops_.begin(), ops_.end(), &op) == ops_.end()) ops_.push_back(&op);
  waived_.emplace_back(op.name, why);
  if (pending_ == &op) pending_ = nullptr;
  out_ << "#\n# " << op.name << ": waived: " << why << '\n';
}

void Report::fail(const OpSpec& op, std::size_t size, const std::string& what) {
  ++failures_;
  print_header(op);
  failed_.emplace_back(op.name, format_bytes(size) + ": " + what);
  out_ << "# " << op.name << " at " << format_bytes(size) << ": FAILED: " << what << '\n';
}

std::size_t Report::headline_size() const {
  return std::find(sizes_.begin(), sizes_.end(), headline_bytes) != sizes_.end() ? headline_bytes
                                                                                 : sizes_.back();
}

const Row* Report::headline_row(const OpSpec& op) const {
  return find(op.name, op.fixed_size != 0 ? op.fixed_size : headline_size());
}

void Report::end(const OpSpec& op) {
  if (pending_ == &op) pending_ = nullptr;  // nothing was measured: waived or failed before any row
  std::size_t wrong = 0;
  for (const Row& r : rows_) {
    if (r.op == &op) wrong += r.stats.wrong;
  }
  const Row* r = headline_row(op);
  out_ << "# " << op.name << ": ";
  if (r == nullptr) {
    out_ << "no result at " << format_bytes(op.fixed_size != 0 ? op.fixed_size : headline_size()) << '\n';
    return;
  }
  out_ << format_bytes(r->size) << (op.fixed_size != 0 ? "" : " per device") << ": " << fixed(r->gbps, 2)
       << " GB/s, " << fixed(r->stats.median_s * 1e6, 2) << " us";
  if (r->ratio) {
    out_ << " = " << fixed(*r->ratio, 3) << " x " << r->ceiling_op
         << (r->stats.baseline_s
                 ? " interleaved, least disturbed of " + std::to_string(r->stats.rounds.size()) + " rounds"
                 : "")
         << " (" << fixed(*r->ceiling, 2) << " GB/s)";
    if (const std::optional<double> target = target_of(op)) {
      const bool met = *r->ratio >= *target;
      out_ << ", target " << target_text(op, target)
           << (op.time_target ? " (" + fixed(1.0 / *r->ratio, 2) + " x)" : "") << ": "
           << (*r->ratio > ceiling_tolerance && raw_ceiling(op, devices_) ? "ABOVE ITS RAW CEILING"
               : met                                                   ? "met"
                                                                       : "BELOW");
    }
  }
  if (r->bound) out_ << "; host memcpy bound (" << op.bound << ") " << fixed(*r->bound, 2) << " GB/s";
  if (r->stream_bound) {
    out_ << ", streaming-store bound (" << op.stream_bound << ") " << fixed(*r->stream_bound, 2) << " GB/s = "
         << fixed(r->gbps / *r->stream_bound, 3) << " x";
  }
  if (r->overlap_bound) {
    out_ << ", with the links running (" << op.overlap_bound << ") " << fixed(*r->overlap_bound, 2) << " GB/s = "
         << fixed(r->gbps / *r->overlap_bound, 3) << " x";
  }
  out_ << "; #wrong " << wrong << '\n';
}

void Report::finish() {
  out_ << "#\n# headline at " << format_bytes(headline_size())
       << " per device (fixed-size operations at their own size): ratio = GB/s / ceiling GB/s; spread = (slowest - fastest sample) / median\n";
  int width = 24;  // the op column: as wide as the longest name
  for (const OpSpec* op : ops_) width = std::max(width, static_cast<int>(op->name.size()));
  char line[240];
  std::snprintf(line, sizeof line, "# %-*s %8s %7s  %-40s %-14s %s\n", width, "op", "ratio", "spread", "vs",
                "target", "");
  out_ << line;
  for (const OpSpec* op : ops_) {
    if (op->kind == Kind::ceiling || op->ceiling.empty()) continue;
    const Row* r = headline_row(*op);
    const bool waived =
        std::any_of(waived_.begin(), waived_.end(), [&](const auto& w) { return w.first == op->name; });
    std::string status = waived ? "waived" : "no result";
    const std::optional<double> target = target_of(*op);
    if (r != nullptr && r->ratio && target) status = *r->ratio >= *target ? "met" : "BELOW";
    if (r != nullptr && r->ratio && *r->ratio > ceiling_tolerance && raw_ceiling(*op, devices_))
      status = "ABOVE CEILING";
    if (r != nullptr && r->ratio && !target) status = "";
    if (r != nullptr && !r->ratio) status = "no " + ceiling_name(*op) + " measured";
    std::snprintf(line, sizeof line, "# %-*s %8s %7s  %-40s %-14s %s\n", width, op->name.c_str(),
                  opt(r != nullptr ? r->ratio : std::nullopt, 3).c_str(),
                  r != nullptr ? (fixed(spread_of(r->stats) * 100, 1) + "%").c_str() : "-",
                  ceiling_name(*op).c_str(), target_text(*op, target).c_str(), status.c_str());
    out_ << line;
  }
  const bool ok = wrong_ == 0 && failures_ == 0;
  out_ << "# gpuxfer-bench: " << (ok ? "OK" : "FAILED") << ": " << wrong_ << " wrong bytes, " << failures_
       << " failed, " << waived_.size() << " waived\n";
}

json_t Report::headline_json() const {
  json_t ratios = json_t::object();
  json_t entries = json_t::array();
  for (const OpSpec* op : ops_) {
    if (op->kind == Kind::ceiling || op->ceiling.empty()) continue;
    const Row* r = headline_row(*op);
    json_t e = {{"op", op->name},
                {"vs", ceiling_name(*op)},
                {"size", op->fixed_size != 0 ? op->fixed_size : headline_size()},
                {"gbps", nullptr},
                {"ceiling", nullptr},
                {"ratio", nullptr},
                {"target", opt_json(target_of(*op))},
                {"met", nullptr}};
    if (r != nullptr) {
      e["gbps"] = r->gbps;
      e["ceiling"] = opt_json(r->ceiling);
      e["spread"] = spread_of(r->stats);
    }
    if (r != nullptr && r->ratio) {
      const double ratio = r->ratio.value();
      e["ratio"] = ratio;
      if (target_of(*op)) e["met"] = ratio >= target_of(*op).value();
      if (op->time_target) e["time_x"] = 1.0 / ratio;
    }
    if (op->time_target && target_of(*op)) e["time_target"] = 1.0 / target_of(*op).value();
    ratios[op->name] = e["ratio"];
    entries.push_back(std::move(e));
  }
  return {{"size", headline_size()}, {"ratios", ratios}, {"entries", entries}};
}

json_t Report::json(const RunnerInfo& info, const BenchOptions& options) const {
  json_t runner = {{"devices", info.ordinals.size()},
                   {"ordinals", info.ordinals},
                   {"names", info.names},
                   {"pci_bus_ids", info.pci_bus_ids},
                   {"pcie", info.pcie},
                   {"links", info.links},
                   {"date", info.date},
                   {"gpuxfer_version", version_string},
                   {"nccl_version", info.nccl_version},
                   {"cuda_runtime", info.cuda_runtime},
                   {"cuda_driver", info.cuda_driver},
                   {"host_threads", info.host_threads},
                   {"chunk_bytes", info.chunk_bytes},
                   {"iters", options.iters},
                   {"warmup", options.warmup},
                   {"sizes", sizes_}};
  json_t ceilings = json_t::object();
  json_t results = json_t::array();
  for (const Row& r : rows_) {
    const double us = r.stats.median_s * 1e6;
    if (r.op->kind == Kind::ceiling) {
      json_t& c = ceilings[r.op->name];
      if (c.is_null())
        c = {{"what", r.op->what}, {"bytes_rule", r.op->bytes.text}, {"rows", json_t::array()}};
      c["rows"].push_back({{"size", r.size},
                           {"bytes", r.bytes},
                           {"time_us", us},
                           {"gbps", r.gbps},
                           {"wrong", r.stats.wrong}});
      continue;
    }
    results.push_back({{"op", r.op->name},
                       {"kind", to_string(r.op->kind)},
                       {"size", r.size},
                       {"bytes", r.bytes},
                       {"time_us", us},
                       {"min_us", r.stats.min_s * 1e6},
                       {"max_us", r.stats.max_s * 1e6},
                       {"gbps", r.gbps},
                       {"ceiling", opt_json(r.ceiling)},
                       {"ceiling_op", r.ceiling_op.empty() ? json_t() : json_t(r.ceiling_op)},
                       {"ratio", opt_json(r.ratio)},
                       {"bound", opt_json(r.bound)},
                       {"bound_op", r.op->bound.empty() ? json_t() : json_t(r.op->bound)},
                       {"stream_bound", opt_json(r.stream_bound)},
                       {"stream_bound_op", r.op->stream_bound.empty() ? json_t() : json_t(r.op->stream_bound)},
                       {"overlap_bound", opt_json(r.overlap_bound)},
                       {"overlap_bound_op", r.op->overlap_bound.empty() ? json_t() : json_t(r.op->overlap_bound)},
                       {"wrong", r.stats.wrong},
                       {"samples", r.stats.samples}});
    if (r.stats.baseline_s) results.back()["interleaved"] = interleaved_json(r.stats);
  }
  json_t waived = json_t::array();
  for (const auto& [op, why] : waived_) waived.push_back({{"op", op}, {"why", why}});
  json_t failed = json_t::array();
  for (const auto& [op, what] : failed_) failed.push_back({{"op", op}, {"what", what}});
  return {{"schema", "gpuxfer-bench/1"},
          {"convention", convention},
          {"runner", runner},
          {"ceilings", ceilings},
          {"results", results},
          {"waived", waived},
          {"failed", failed},
          {"headline", headline_json()},
          {"wrong", wrong_}};
}

}  // namespace gpuxfer::bench
