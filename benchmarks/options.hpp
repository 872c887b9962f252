// gpuxfer-bench's command line.
#pragma once

#include <cstddef>
#include <string>
#include <variant>
#include <vector>

namespace gpuxfer::bench {

struct BenchOptions {
  std::vector<std::size_t> sizes;  ///< bytes per device, ascending
  int iters = 10;                  ///< timed samples per operation and size (the median is reported)
  int warmup = 2;                  ///< untimed samples before them (verified all the same)
  std::vector<int> devices;        ///< CUDA ordinals (Options::devices); empty: every visible device
  std::vector<std::string> ops;    ///< operations to run (their ceilings are added); empty: all
  std::string json_path;           ///< where to write the JSON report; empty: none
  bool short_mode = false;         ///< --short: the quick CI set of sizes and samples
  bool list = false;               ///< --list: print the operations and exit
  bool ranks = false;              ///< --ranks: the cross-process operations, one rank per process (ranks/)
};

/// The sizes and samples of --short: 4 KiB, 1 MiB, 64 MiB, 256 MiB; 5 samples.
inline const std::vector<std::size_t> short_sizes = {std::size_t{4} << 10, std::size_t{1} << 20,
                                                     std::size_t{64} << 20, std::size_t{256} << 20};
inline constexpr int short_iters = 5;
/// The largest size by default: 256 MiB in one process, 1 GiB with --ranks.
inline constexpr const char* default_max = "256M";
inline constexpr const char* default_ranks_max = "1G";

/// Parses the command line. Returns the options, or the exit code when parsing ends the program
/// (--help: 0; a bad argument: the message is printed and the code is non-zero).
[[nodiscard]] std::variant<BenchOptions, int> parse_options(int argc, char** argv);

/// min, min*factor, ... up to max inclusive (nccl-tests' -b/-e/-f). @throws Error(Errc::invalid_option)
[[nodiscard]] std::vector<std::size_t> size_series(std::size_t min, std::size_t max, std::size_t factor);

}  // namespace gpuxfer::bench
