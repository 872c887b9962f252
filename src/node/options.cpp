#include <gpuxfer/options.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include <gpuxfer/error.hpp>

#include "node/environment.hpp"

namespace gpuxfer {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

[[noreturn]] void bad_option(const std::string& message) { throw Error(Errc::invalid_option, message); }

unsigned long long parse_unsigned(std::string_view text, const char* what) {
  unsigned long long value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end) {
    bad_option(std::string("'") + std::string(text) + "' is not " + what);
  }
  return value;
}

// Runs @p parse on the variable's value, adding the variable's name to any error.
template <typename Parse>
void apply_var(const EnvLookup& lookup, const char* name, Parse parse) {
  const auto value = lookup(name);
  if (!value) return;
  try {
    parse(*value);
  } catch (const Error& e) {
    bad_option(std::string(name) + "=" + *value + ": " + e.message());
  }
}

}  // namespace

unsigned default_host_threads() noexcept {
  const unsigned cores = std::thread::hardware_concurrency();
  return std::clamp(cores / 2, 1U, 16U);
}

std::size_t parse_size(std::string_view text) {
  const std::string_view t = trim(text);
  std::size_t digits = 0;
  while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
  if (digits == 0) bad_option("'" + std::string(text) + "' is not a byte count (like 4096, 64K, 8MiB, 2G)");
  const unsigned long long number = parse_unsigned(t.substr(0, digits), "a byte count");
  const std::string suffix = lower(trim(t.substr(digits)));
  unsigned shift = 0;
  if (suffix.empty() || suffix == "b") {
    shift = 0;
  } else if (suffix == "k" || suffix == "kb" || suffix == "kib") {
    shift = 10;
  } else if (suffix == "m" || suffix == "mb" || suffix == "mib") {
    shift = 20;
  } else if (suffix == "g" || suffix == "gb" || suffix == "gib") {
    shift = 30;
  } else if (suffix == "t" || suffix == "tb" || suffix == "tib") {
    shift = 40;
  } else {
    bad_option("'" + std::string(text) + "' has an unknown size suffix (use K, M, G or T)");
  }
  if (number > (std::numeric_limits<std::size_t>::max() >> shift)) {
    bad_option("'" + std::string(text) + "' is too large");
  }
  return static_cast<std::size_t>(number) << shift;
}

std::string_view to_string(NumaPlacement placement) noexcept {
  switch (placement) {
    case NumaPlacement::automatic: return "automatic";
    case NumaPlacement::on: return "on";
    case NumaPlacement::off: return "off";
  }
  return "automatic";
}

NumaPlacement parse_numa_placement(std::string_view text) {
  const std::string v = lower(trim(text));
  if (v == "auto" || v == "automatic") return NumaPlacement::automatic;
  if (v == "on") return NumaPlacement::on;
  if (v == "off") return NumaPlacement::off;
  bad_option("'" + std::string(text) + "' is not a NUMA placement (use auto, on or off)");
}

bool parse_bool(std::string_view text) {
  const std::string v = lower(trim(text));
  if (v == "1" || v == "on" || v == "true" || v == "yes") return true;
  if (v == "0" || v == "off" || v == "false" || v == "no") return false;
  bad_option("'" + std::string(text) + "' is not a boolean (use 1/0, on/off, true/false, yes/no)");
}

std::vector<int> parse_device_list(std::string_view text) {
  std::vector<int> out;
  const std::string_view all = trim(text);
  if (all.empty()) return out;
  std::size_t start = 0;
  while (start <= all.size()) {
    const std::size_t comma = all.find(',', start);
    const std::string_view item = trim(all.substr(start, comma == std::string_view::npos ? all.npos : comma - start));
    const auto value = parse_unsigned(item, "a device ordinal (like 0,1,3)");
    if (value > static_cast<unsigned long long>(std::numeric_limits<int>::max())) {
      bad_option("device ordinal '" + std::string(item) + "' is too large");
    }
    out.push_back(static_cast<int>(value));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::size_t> parse_size_list(std::string_view text) {
  std::vector<std::size_t> out;
  const std::string_view all = trim(text);
  if (all.empty()) return out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = all.find(',', start);
    std::string_view item = trim(all.substr(start, comma == std::string_view::npos ? all.npos : comma - start));
    unsigned long long count = 1;
    if (const std::size_t x = item.find_first_of("xX"); x != std::string_view::npos) {
      count = parse_unsigned(trim(item.substr(0, x)), "a block count (like 2x256MiB)");
      item = trim(item.substr(x + 1));
    }
    if (count > 1024) bad_option("block count in '" + std::string(text) + "' is out of range (0..1024)");
    const std::size_t bytes = parse_size(item);
    out.insert(out.end(), static_cast<std::size_t>(count), bytes);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

void Options::validate() const {
  if (min_devices < 0) bad_option("min_devices must be >= 0, got " + std::to_string(min_devices));
  std::set<int> seen;
  for (const int d : devices) {
    if (d < 0) bad_option("devices: ordinal " + std::to_string(d) + " is negative");
    if (!seen.insert(d).second) bad_option("devices: ordinal " + std::to_string(d) + " is listed twice");
  }
  if (chunk_bytes < 4096) {
    bad_option("chunk_bytes must be at least 4096, got " + std::to_string(chunk_bytes));
  }
  if (pool_limit_bytes / min_pool_chunks < chunk_bytes) {
    bad_option("pool_limit_bytes (" + std::to_string(pool_limit_bytes) + ") must be at least " +
               std::to_string(min_pool_chunks) + " x chunk_bytes (" + std::to_string(min_pool_chunks) + " x " +
               std::to_string(chunk_bytes) + "): a pageable broadcast keeps that many chunks in flight");
  }
  std::size_t reserve = 0;
  for (const std::size_t bytes : pool_reserve) {
    if (bytes == 0) bad_option("pool_reserve: a block of 0 bytes");
    reserve += std::min(bytes, pool_limit_bytes + 1);
  }
  if (reserve > pool_limit_bytes) {
    bad_option("pool_reserve (" + std::to_string(reserve) + " bytes per device) is more than pool_limit_bytes (" +
               std::to_string(pool_limit_bytes) + ")");
  }
  if (simulated_devices > max_simulated_devices) {
    bad_option("simulated_devices must be in 0.." + std::to_string(max_simulated_devices) + ", got " +
               std::to_string(simulated_devices));
  }
  if (host_threads == 0 || host_threads > 256) {
    bad_option("host_threads must be in 1..256, got " + std::to_string(host_threads));
  }
}

Options apply_env(Options base, const EnvLookup& lookup) {
  apply_var(lookup, "GPUXFER_DEVICES", [&](const std::string& v) { base.devices = parse_device_list(v); });
  apply_var(lookup, "GPUXFER_MIN_DEVICES", [&](const std::string& v) {
    const auto n = parse_unsigned(trim(v), "a device count");
    if (n > 4096) bad_option("device count " + v + " is out of range");
    base.min_devices = static_cast<int>(n);
  });
  apply_var(lookup, "GPUXFER_PEER_ACCESS", [&](const std::string& v) { base.enable_peer_access = parse_bool(v); });
  apply_var(lookup, "GPUXFER_NCCL", [&](const std::string& v) { base.enable_nccl = parse_bool(v); });
  apply_var(lookup, "GPUXFER_POOL_LIMIT", [&](const std::string& v) { base.pool_limit_bytes = parse_size(v); });
  apply_var(lookup, "GPUXFER_POOL_RESERVE", [&](const std::string& v) { base.pool_reserve = parse_size_list(v); });
  apply_var(lookup, "GPUXFER_CHUNK_BYTES", [&](const std::string& v) { base.chunk_bytes = parse_size(v); });
  apply_var(lookup, "GPUXFER_HOST_THREADS", [&](const std::string& v) {
    const auto n = parse_unsigned(trim(v), "a thread count");
    if (n > 256) bad_option("thread count " + v + " is out of range (1..256)");
    base.host_threads = static_cast<unsigned>(n);
  });
  apply_var(lookup, "GPUXFER_NUMA", [&](const std::string& v) { base.numa = parse_numa_placement(v); });
  apply_var(lookup, "GPUXFER_CAPTURE_KERNELS",
            [&](const std::string& v) { base.capture_copy_kernels = parse_bool(v); });
  apply_var(lookup, "GPUXFER_SIMULATED_DEVICES", [&](const std::string& v) {
    const auto n = parse_unsigned(trim(v), "a device count");
    if (n > Options::max_simulated_devices) {
      bad_option("device count " + v + " is out of range (0.." + std::to_string(Options::max_simulated_devices) + ")");
    }
    base.simulated_devices = static_cast<std::size_t>(n);
  });
  try {
    base.validate();
  } catch (const Error& e) {
    // Name the variables whose fields the complaint is about, with their values.
    static constexpr std::pair<const char*, const char*> fields[] = {
        {"min_devices", "GPUXFER_MIN_DEVICES"}, {"devices", "GPUXFER_DEVICES"},
        {"chunk_bytes", "GPUXFER_CHUNK_BYTES"}, {"pool_limit_bytes", "GPUXFER_POOL_LIMIT"},
        {"pool_reserve", "GPUXFER_POOL_RESERVE"},
        {"host_threads", "GPUXFER_HOST_THREADS"}, {"simulated_devices", "GPUXFER_SIMULATED_DEVICES"}};
    std::string names;
    for (const auto& [field, variable] : fields) {
      const auto value = lookup(variable);
      // "devices" is also the tail of "min_devices": that field's messages start with "devices:".
      const bool mentioned = std::string_view(field) == "devices" ? e.message().starts_with("devices:")
                                                                 : e.message().find(field) != std::string::npos;
      if (value && mentioned) names += std::string(names.empty() ? "" : ", ") + variable + "=" + *value;
    }
    bad_option((names.empty() ? std::string("GPUXFER_* variables") : names) + ": " + e.message());
  }
  return base;
}

namespace detail {

EnvLookup process_env_lookup() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

}  // namespace detail

Options Options::from_env() { return apply_env(Options{}, detail::process_env_lookup()); }

}  // namespace gpuxfer
