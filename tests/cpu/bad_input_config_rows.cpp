// Bad configuration: Options fields out of range, GPUXFER_* variables (a fake environment and the process
// one), and the parsers behind them.
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/env.hpp"
#include "cpu/bad_input.hpp"

namespace gpuxfer::test {
namespace {

// One Options field out of range: validate() and MultiGpuManager::create both refuse it.
struct BadOption {
  std::string name;
  std::function<void(Options&)> set;
  Texts texts;
};

std::vector<BadOption> bad_options() {
  return {
      {"min_devices_negative", [](Options& o) { o.min_devices = -1; }, {"min_devices must be >= 0", "-1"}},
      {"devices_negative",
       [](Options& o) {
         o.devices = {0, -2};
       },
       {"devices: ordinal -2 is negative"}},
      {"devices_twice",
       [](Options& o) {
         o.devices = {1, 0, 1};
       },
       {"devices: ordinal 1 is listed twice"}},
      {"chunk_bytes_zero",
       [](Options& o) { o.chunk_bytes = 0; },
       {"chunk_bytes must be at least 4096, got 0"}},
      {"chunk_bytes_below_a_page",
       [](Options& o) { o.chunk_bytes = 4095; },
       {"chunk_bytes must be at least 4096, got 4095"}},
      {"pool_limit_zero",
       [](Options& o) { o.pool_limit_bytes = 0; },
       {"pool_limit_bytes (0) must be at least 4 x chunk_bytes (4 x 8388608)"}},
      {"pool_limit_below_the_chunk",
       [](Options& o) {
         o.chunk_bytes = std::size_t{4} << 20;
         o.pool_limit_bytes = o.chunk_bytes - 1;
       },
       {"pool_limit_bytes (4194303) must be at least 4 x chunk_bytes (4 x 4194304)"}},
      {"host_threads_zero",
       [](Options& o) { o.host_threads = 0; },
       {"host_threads must be in 1..256, got 0"}},
      {"host_threads_too_many",
       [](Options& o) { o.host_threads = 257; },
       {"host_threads must be in 1..256, got 257"}},
  };
}

// (name, variable, value): a GPUXFER_* variable and a bad value of it.
using EnvCases = std::vector<std::tuple<std::string, std::string, std::string>>;

// One row a case, named @p prefix + name: @p apply sets the variable to the value and must throw
// invalid_option naming both.
std::vector<CpuRow> env_rows_of(const std::string& prefix, const EnvCases& cases,
                                void (*apply)(const std::string& variable, const std::string& value)) {
  std::vector<CpuRow> rows;
  for (const auto& [name, variable, value] : cases) {
    rows.push_back({prefix + name, [variable, value, apply](CpuWorld&) { apply(variable, value); },
                    Errc::invalid_option, [variable, value](const CpuWorld&) { return Texts{variable + "=" + value}; }});
  }
  return rows;
}

std::vector<CpuRow> option_rows() {
  std::vector<CpuRow> rows;
  for (const BadOption& bad : bad_options()) {
    rows.push_back({"validate_" + bad.name,
                    [set = bad.set](CpuWorld&) {
                      Options opts;
                      set(opts);
                      opts.validate();
                    },
                    Errc::invalid_option, [texts = bad.texts](const CpuWorld&) { return texts; }});
    rows.push_back({"create_" + bad.name,
                    [set = bad.set](CpuWorld&) {
                      Options opts;
                      opts.min_devices = 0;
                      set(opts);
                      (void)MultiGpuManager::create(opts);
                    },
                    Errc::invalid_option, [texts = bad.texts](const CpuWorld&) { return texts; }});
  }
  // More devices required than exist: no_device, saying how many were found and needed.
  rows.push_back(more_devices_than_visible_row<CpuWorld>("create_min_devices_above_the_device_count"));
  rows.push_back({"transfer_null_manager", [](CpuWorld&) { InterGpuTransfer xfer(nullptr); },
                  Errc::invalid_argument,
                  [](const CpuWorld&) { return Texts{"InterGpuTransfer needs a manager, got nullptr"}; }});
  return rows;
}

// A GPUXFER_* variable with a bad value: apply_env throws invalid_option naming the variable and value.
std::vector<CpuRow> env_rows() {
  const EnvCases cases = {
      // name suffix, variable, value
      {"devices_not_a_number", "GPUXFER_DEVICES", "0,x"},
      {"devices_negative", "GPUXFER_DEVICES", "-1"},
      {"devices_empty_item", "GPUXFER_DEVICES", "0,,1"},
      {"devices_trailing_comma", "GPUXFER_DEVICES", "0,"},
      {"devices_twice", "GPUXFER_DEVICES", "1,1"},
      {"devices_too_large", "GPUXFER_DEVICES", "99999999999"},
      {"min_devices_negative", "GPUXFER_MIN_DEVICES", "-1"},
      {"min_devices_word", "GPUXFER_MIN_DEVICES", "two"},
      {"min_devices_empty", "GPUXFER_MIN_DEVICES", ""},
      {"min_devices_too_many", "GPUXFER_MIN_DEVICES", "4097"},
      {"peer_access_word", "GPUXFER_PEER_ACCESS", "maybe"},
      {"peer_access_two", "GPUXFER_PEER_ACCESS", "2"},
      {"nccl_two", "GPUXFER_NCCL", "2"},
      {"nccl_word", "GPUXFER_NCCL", "nccl"},
      {"pool_limit_word", "GPUXFER_POOL_LIMIT", "lots"},
      {"pool_limit_bad_suffix", "GPUXFER_POOL_LIMIT", "4X"},
      {"pool_limit_overflow", "GPUXFER_POOL_LIMIT", "99999999999T"},
      {"pool_limit_negative", "GPUXFER_POOL_LIMIT", "-1G"},
      {"pool_limit_zero", "GPUXFER_POOL_LIMIT", "0"},
      {"chunk_bytes_zero", "GPUXFER_CHUNK_BYTES", "0"},
      {"chunk_bytes_below_a_page", "GPUXFER_CHUNK_BYTES", "4095"},
      {"chunk_bytes_word", "GPUXFER_CHUNK_BYTES", "big"},
      {"chunk_bytes_fraction", "GPUXFER_CHUNK_BYTES", "1.5M"},
      {"host_threads_zero", "GPUXFER_HOST_THREADS", "0"},
      {"host_threads_too_many", "GPUXFER_HOST_THREADS", "257"},
      {"host_threads_negative", "GPUXFER_HOST_THREADS", "-3"},
      {"host_threads_word", "GPUXFER_HOST_THREADS", "x"},
      {"host_threads_wraps_32_bits", "GPUXFER_HOST_THREADS", "4294967297"},
  };
  return env_rows_of("env_", cases, [](const std::string& variable, const std::string& value) {
    FakeEnv env(std::map<std::string, std::string>{{variable, value}});
    (void)apply_env(Options{}, env.lookup());
  });
}

// The same through the process environment, the way an HPC job sets them: create() refuses.
std::vector<CpuRow> process_env_rows() {
  const EnvCases cases = {
      {"process_env_chunk_bytes_word", "GPUXFER_CHUNK_BYTES", "big"},
      {"process_env_pool_limit_below_the_chunk", "GPUXFER_POOL_LIMIT", "4K"},
      {"process_env_host_threads_zero", "GPUXFER_HOST_THREADS", "0"},
      {"process_env_devices_twice", "GPUXFER_DEVICES", "0,0"},
      {"process_env_peer_access_word", "GPUXFER_PEER_ACCESS", "sometimes"},
  };
  return env_rows_of("", cases, [](const std::string& variable, const std::string& value) {
    const ScopedEnv min_devices("GPUXFER_MIN_DEVICES", "0");
    const ScopedEnv bad(variable.c_str(), value.c_str());
    (void)MultiGpuManager::create(Options::from_env());
  });
}

std::vector<CpuRow> parse_rows() {
  std::vector<CpuRow> rows;
  const std::vector<std::pair<std::string, std::string>> sizes = {
      {"empty", ""},
      {"blank", "  "},
      {"word", "abc"},
      {"unknown_suffix", "12Q"},
      {"negative", "-1"},
      {"fraction", "1.5G"},
      {"hex", "0x10"},
      {"overflow_with_suffix", "99999999999T"},
      {"overflow", "18446744073709551616"},
      {"two_numbers", "4 4"},
      {"suffix_only", "MiB"},
  };
  for (const auto& [suffix, text] : sizes) {
    rows.push_back({"parse_size_" + suffix, [text](CpuWorld&) { (void)parse_size(text); }, Errc::invalid_option,
                    [text](const CpuWorld&) { return Texts{"'" + text + "'"}; }});
  }
  for (const auto& [suffix, text] : std::vector<std::pair<std::string, std::string>>{
           {"empty", ""}, {"two", "2"}, {"word", "maybe"}, {"negative", "-1"}}) {
    rows.push_back({"parse_bool_" + suffix, [text](CpuWorld&) { (void)parse_bool(text); }, Errc::invalid_option,
                    [text](const CpuWorld&) { return Texts{"'" + text + "' is not a boolean"}; }});
  }
  for (const auto& [suffix, text] :
       std::vector<std::pair<std::string, std::string>>{{"word", "a"},
                                                        {"negative", "-1"},
                                                        {"empty_item", "0,,1"},
                                                        {"trailing_comma", "1,"},
                                                        {"leading_comma", ",1"},
                                                        {"too_large", "2147483648"},
                                                        {"spaces_inside", "1 2"}}) {
    rows.push_back({"parse_device_list_" + suffix, [text](CpuWorld&) { (void)parse_device_list(text); },
                    Errc::invalid_option, [](const CpuWorld&) { return Texts{"device ordinal"}; }});
  }
  return rows;
}

}  // namespace

std::vector<CpuRow> config_rows() {
  std::vector<CpuRow> rows;
  for (auto part : {option_rows(), env_rows(), process_env_rows(), parse_rows()}) {
    for (CpuRow& row : part) rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace gpuxfer::test
