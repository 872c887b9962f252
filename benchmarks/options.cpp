#include "options.hpp"

#include <sstream>

#include <CLI/CLI.hpp>

#include <gpuxfer/error.hpp>
#include <gpuxfer/options.hpp>
#include <gpuxfer/version.hpp>

namespace gpuxfer::bench {

std::vector<std::size_t> size_series(std::size_t min, std::size_t max, std::size_t factor) {
  if (min == 0 || max < min) {
    throw Error(Errc::invalid_option,
                "sizes: need 0 < -b (" + std::to_string(min) + ") <= -e (" + std::to_string(max) + ")");
  }
  if (factor < 2)
    throw Error(Errc::invalid_option, "sizes: -f must be at least 2, got " + std::to_string(factor));
  std::vector<std::size_t> sizes;
  for (std::size_t s = min; s <= max; s *= factor) {
    sizes.push_back(s);
    if (s > max / factor) break;
  }
  return sizes;
}

std::variant<BenchOptions, int> parse_options(int argc, char** argv) {
  BenchOptions o;
  std::string min = "4K";
  std::string max = default_max;
  std::size_t factor = 4;
  std::string devices;
  std::string ops;

  CLI::App app{
      "gpuxfer-bench: every gpuxfer operation against its ceilings measured in the same run, data verified "
      "after every sample. GB/s = bytes / time / 1e9."};
  app.set_version_flag("--version", std::string(version_string));
  app.add_option("-b,--minbytes", min, "Smallest size per device (K/M/G suffixes, powers of 1024)")
      ->capture_default_str();
  CLI::Option* max_option =
      app.add_option("-e,--maxbytes", max, "Largest size per device (1G with --ranks)")->capture_default_str();
  app.add_option("-f,--stepfactor", factor, "Multiply the size by this between steps")->capture_default_str();
  CLI::Option* iters =
      app.add_option("--iters", o.iters, "Timed samples per size (median reported), at least 5")
          ->capture_default_str();
  app.add_option("--warmup", o.warmup, "Untimed samples before them, at least 1 (verified too, not gated)")
      ->capture_default_str();
  CLI::Option* devices_option =
      app.add_option("--devices", devices, "CUDA ordinals to use, e.g. 0,1 (default: all visible)");
  app.add_option("--ops", ops, "Operations to run, comma-separated (see --list); their ceilings run too");
  app.add_option("--json", o.json_path, "Write the results as JSON to this file");
  app.add_flag("--short", o.short_mode, "Quick CI mode: sizes 4K,1M,64M,256M and 5 samples");
  app.add_flag("--list", o.list, "List the operations and exit");
  app.add_flag("--ranks", o.ranks,
               "The cross-process operations (Communicator), one rank per process, started by `gpuxfer launch "
               "-n N` (or torchrun, srun, mpirun); rank 0 also times their single-process equivalents and "
               "reports the ratios");
  devices_option->excludes("--ranks");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (o.ranks && max_option->count() == 0) max = default_ranks_max;
    o.sizes = o.short_mode ? short_sizes : size_series(parse_size(min), parse_size(max), factor);
    if (o.short_mode && iters->count() == 0) o.iters = short_iters;
    if (o.iters < 5)
      throw Error(Errc::invalid_option, "--iters must be at least 5, got " + std::to_string(o.iters));
    if (o.warmup < 1) {
      throw Error(Errc::invalid_option,
                  "--warmup must be at least 1: a case's first run loads kernels and NCCL connections, which "
                  "must not happen while the spin kernel holds the device");
    }
    if (!devices.empty()) o.devices = parse_device_list(devices);
    std::stringstream list(ops);
    for (std::string op; std::getline(list, op, ',');) {
      if (!op.empty()) o.ops.push_back(op);
    }
  } catch (const Error& e) {
    std::cerr << "gpuxfer-bench: " << e.message() << '\n';
    return 1;
  }
  return o;
}

}  // namespace gpuxfer::bench
