// `gpuxfer check`: every operation of InterGpuTransfer on every path, end to end on real data. Each case
// fills the registered buffers with patterns that depend on device and seed (never zeros), poisons what it
// expects to be overwritten, runs the operation and compares every byte. Prints PASS/FAIL/SKIP per path.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gpuxfer/error.hpp>
#include <gpuxfer/host_buffer.hpp>
#include <gpuxfer/inter_gpu_transfer.hpp>
#include <gpuxfer/multi_gpu_manager.hpp>
#include <gpuxfer/options.hpp>
#include <gpuxfer/testing/format.hpp>
#include <gpuxfer/testing/pattern.hpp>

#include "check_fixture.hpp"
#include "commands.hpp"

namespace gpuxfer::cli {

using testing::format_bytes;
using testing::format_fixed;

namespace {

constexpr std::size_t no_skip = static_cast<std::size_t>(-1);

std::string gather_blocking(Fixture& f, std::size_t dst) {
  f.fill_all_base();
  const std::vector<HostBuffer> results = f.transfer().gather_blocking(dst);
  Findings found;
  if (results.size() != f.n() - 1) {
    found.add(std::to_string(results.size()) + " buffers, expected " + std::to_string(f.n() - 1));
    return found.text();
  }
  for (std::size_t src = 0, k = 0; src < f.n(); ++src) {
    if (src != dst) {
      found.host("from device " + std::to_string(src), results[k++].span(), f.bytes(), f.base(src));
    }
  }
  return found.text();
}

std::string gather_all(Fixture& f) {
  f.fill_all_base();
  const std::vector<HostBuffer> results = f.transfer().gather_all();
  Findings found;
  if (results.size() != f.n()) {
    found.add(std::to_string(results.size()) + " buffers, expected " + std::to_string(f.n()));
    return found.text();
  }
  for (std::size_t src = 0; src < f.n(); ++src) {
    found.host("from device " + std::to_string(src), results[src].span(), f.bytes(), f.base(src));
  }
  return found.text();
}

std::string gather_into(Fixture& f, bool pinned) {
  f.fill_all_base();
  // A poisoned guard after the payload catches a write past the end.
  constexpr std::size_t guard = 4096;
  const std::size_t total = f.n() * f.bytes();
  HostBuffer pinned_out;
  std::vector<std::byte> pageable_out;
  std::span<std::byte> out;
  if (pinned) {
    pinned_out = f.manager().pinned_pool().acquire(total + guard);
    out = pinned_out.span();
  } else {
    pageable_out.resize(total + guard);
    out = pageable_out;
  }
  pattern::fill_host(out, f.poison(0));
  const std::vector<GatherPiece> pieces = f.transfer().gather_into(out);
  Findings found;
  found.layout(pieces, f, no_skip);
  for (const GatherPiece& p : pieces) {
    if (p.offset + p.size <= total) {
      found.host("from device " + std::to_string(p.device), out.subspan(p.offset, p.size), f.bytes(),
                 f.base(p.device));
    }
  }
  found.wrong_bytes("guard after the payload",
                    pattern::count_mismatches_host(out.subspan(total), f.poison(0), total), guard);
  return found.text();
}

std::string gather_to_device(Fixture& f, std::size_t dst) {
  f.fill_all_base();
  const std::size_t total = f.n() * f.bytes();
  DeviceMemory out(f.ordinal(dst), total);
  f.fill_raw(dst, out.get(), total, f.poison(dst));
  const std::vector<GatherPiece> pieces = f.transfer().gather_to_device(dst, out.get(), total);
  Findings found;
  found.layout(pieces, f, no_skip);
  for (const GatherPiece& p : pieces) {
    if (p.offset + p.size <= total) {
      const auto* piece = static_cast<const std::byte*>(out.get()) + p.offset;
      found.wrong_bytes("from device " + std::to_string(p.device),
                        f.mismatches(dst, piece, p.size, f.base(p.device)), p.size);
    }
  }
  return found.text();
}

std::string copy_buffer(Fixture& f, std::size_t dst) {
  f.fill_all_base();
  std::vector<std::byte> data(f.bytes());
  pattern::fill_host(data, f.host_seed());
  f.transfer().copy_buffer((dst + 1) % f.n(), dst, data);
  Findings found;
  found.devices(f, [&](std::size_t dev) { return dev == dst ? f.host_seed() : f.base(dev); });
  return found.text();
}

std::string copy_device_buffer(Fixture& f, std::size_t src, std::size_t dst, CopyPath path) {
  if (path == CopyPath::peer && !f.manager().peer_enabled(src, dst)) {
    throw Skip{"no peer access from " + std::to_string(src) + " to " + std::to_string(dst) + " (link " +
               std::string(to_string(f.manager().link(src, dst))) + ")"};
  }
  f.fill_all_base();
  f.transfer().copy_device_buffer(src, dst, path);
  Findings found;
  found.devices(f, [&](std::size_t dev) { return dev == dst ? f.base(src) : f.base(dev); });
  return found.text();
}

std::string broadcast(Fixture& f, HostBroadcastPath path, bool pinned) {
  if (path == HostBroadcastPath::scatter_allgather && !f.manager().all_peers_enabled()) {
    throw Skip{"needs peer access between every pair of devices"};
  }
  f.fill_all_base();
  HostBuffer pinned_data;
  std::vector<std::byte> pageable_data;
  std::span<std::byte> data;
  if (pinned) {
    pinned_data = f.manager().pinned_pool().acquire(f.bytes());
    data = pinned_data.span();
  } else {
    pageable_data.resize(f.bytes());
    data = pageable_data;
  }
  pattern::fill_host(data, f.host_seed());
  f.transfer().broadcast(data, path);
  Findings found;
  found.devices(f, [&](std::size_t) { return f.host_seed(); });
  return found.text();
}

std::string broadcast_from_device(Fixture& f, std::size_t root, DeviceBroadcastPath path) {
  if (path == DeviceBroadcastPath::nccl && !f.manager().nccl_available()) {
    throw Skip{"NCCL " + f.manager().nccl_status()};
  }
  f.fill_all_base();
  f.transfer().broadcast_from_device(root, path);
  Findings found;
  found.devices(f, [&](std::size_t) { return f.base(root); });
  return found.text();
}

/// Runs the cases and prints one line each.
class Report {
 public:
  /// Runs @p body as case @p name; @p needs_two skips it with fewer than two devices.
  void run(const std::string& name, std::size_t devices, bool needs_two,
           const std::function<std::string()>& body) {
    const auto start = std::chrono::steady_clock::now();
    const char* verdict = "PASS";
    std::string detail;
    try {
      if (needs_two && devices < 2) {
        if (two_devices_later_) return;  // they run on simulated devices next
        throw Skip{"needs 2 devices (" + std::to_string(devices) + " visible)"};
      }
      detail = body();
      verdict = detail.empty() ? "PASS" : "FAIL";
    } catch (const Skip& skip) {
      verdict = "SKIP";
      detail = skip.why;
    } catch (const Error& e) {
      verdict = "FAIL";
      detail = std::string(to_string(e.code())) + ": " + e.message();
    } catch (const std::exception& e) {
      verdict = "FAIL";
      detail = e.what();
    }
    if (detail.empty()) {
      const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
      detail = format_fixed(ms.count(), 1) + " ms";
    }
    std::printf("%s  %-38s %s\n", verdict, name.c_str(), detail.c_str());
    std::fflush(stdout);
    (verdict[0] == 'P' ? passed_ : verdict[0] == 'F' ? failed_ : skipped_) += 1;
  }

  /// The two-device cases run later on simulated devices: with fewer devices, leave them out.
  void two_devices_later(bool later) { two_devices_later_ = later; }

  [[nodiscard]] int passed() const { return passed_; }
  [[nodiscard]] int failed() const { return failed_; }
  [[nodiscard]] int skipped() const { return skipped_; }

 private:
  int passed_ = 0;
  int failed_ = 0;
  int skipped_ = 0;
  bool two_devices_later_ = false;
};

void run_cases(Fixture& f, Report& r) {
  const std::size_t n = f.n();
  const auto s = [](std::size_t i) { return std::to_string(i); };
  for (std::size_t dst = 0; dst < n; ++dst) {
    r.run("gather_blocking dst=" + s(dst), n, false, [&] { return gather_blocking(f, dst); });
  }
  r.run("gather_all", n, false, [&] { return gather_all(f); });
  r.run("gather_into pinned", n, false, [&] { return gather_into(f, true); });
  r.run("gather_into pageable", n, false, [&] { return gather_into(f, false); });
  for (std::size_t dst = 0; dst < n; ++dst) {
    r.run("gather_to_device dst=" + s(dst), n, false, [&] { return gather_to_device(f, dst); });
  }
  for (std::size_t dst = 0; dst < n; ++dst) {
    r.run("copy_buffer host->" + s(dst), n, false, [&] { return copy_buffer(f, dst); });
  }
  for (const CopyPath path : {CopyPath::peer, CopyPath::staged}) {
    const std::string label =
        std::string("copy_device_buffer ") + (path == CopyPath::peer ? "peer" : "staged");
    if (n < 2) {
      r.run(label, n, true, [] { return std::string(); });
    }
    for (std::size_t src = 0; src < n; ++src) {
      for (std::size_t dst = 0; dst < n; ++dst) {
        if (src != dst) {
          r.run(label + " " + s(src) + "->" + s(dst), n, true,
                [&] { return copy_device_buffer(f, src, dst, path); });
        }
      }
    }
  }
  for (const HostBroadcastPath path : {HostBroadcastPath::per_device, HostBroadcastPath::scatter_allgather}) {
    const bool scatter = path == HostBroadcastPath::scatter_allgather;
    const std::string label = std::string("broadcast ") + (scatter ? "scatter_allgather" : "per_device");
    r.run(label + " pageable", n, scatter, [&] { return broadcast(f, path, false); });
    r.run(label + " pinned", n, scatter, [&] { return broadcast(f, path, true); });
  }
  for (const DeviceBroadcastPath path : {DeviceBroadcastPath::nccl, DeviceBroadcastPath::peer}) {
    const std::string label =
        std::string("broadcast_from_device ") + (path == DeviceBroadcastPath::nccl ? "nccl" : "peer");
    if (n < 2) {
      r.run(label, n, true, [] { return std::string(); });
    }
    for (std::size_t root = 0; root < n && n >= 2; ++root) {
      r.run(label + " root=" + s(root), n, true, [&] { return broadcast_from_device(f, root, path); });
    }
  }
}

// Runs every case on @p manager's devices, then prints the pinned pool's counters.
void check_devices(const std::shared_ptr<MultiGpuManager>& manager, std::size_t bytes, std::uint64_t seed,
                   Report& report) {
  const bool simulated = manager->options().simulated_devices > 0;
  std::printf("gpuxfer check: %zu %sdevice%s, %s per device, seed %llu\n", manager->device_count(),
              simulated ? "simulated " : "", manager->device_count() == 1 ? "" : "s", format_bytes(bytes).c_str(),
              static_cast<unsigned long long>(seed));
  Fixture fixture(manager, bytes, seed);
  run_cases(fixture, report);
  const PoolStats pool = manager->pinned_pool().stats();
  std::printf("pinned pool: %zu allocations, %zu reuses, peak in use %s\n", pool.allocations, pool.reuses,
              format_bytes(pool.peak_in_use).c_str());
}

}  // namespace

int run_check(const CheckArgs& args) {
  const std::size_t bytes = parse_size(args.size);
  if (bytes == 0) {
    throw Error(Errc::invalid_option, "--size must be at least 1 byte");
  }
  std::shared_ptr<MultiGpuManager> manager;
  try {
    manager = open_manager();
  } catch (const Error& e) {
    if (e.code() != Errc::no_device) {
      throw;
    }
    std::fprintf(stderr, "gpuxfer check: no CUDA device: %s\n", e.message().c_str());
    return exit_no_device;
  }
  if (manager->device_count() == 0) {
    std::fprintf(stderr, "gpuxfer check: no CUDA device: %s\n", no_device_reason(*manager).c_str());
    return exit_no_device;
  }
  Report report;
  const bool simulate = manager->device_count() == 1 && manager->options().simulated_devices == 0;
  report.two_devices_later(simulate);
  check_devices(manager, bytes, args.seed, report);
  if (simulate) {
    // The cases of two devices on the one GPU, as two simulated devices.
    Options options = manager->options();
    options.simulated_devices = 2;
    const std::uint64_t other_seed = args.seed + 1;
    std::printf("\n");
    check_devices(MultiGpuManager::create(std::move(options)), bytes, other_seed, report);
  }
  std::printf("gpuxfer check: %d passed, %d failed, %d skipped\n", report.passed(), report.failed(),
              report.skipped());
  return report.failed() == 0 ? 0 : 1;
}

}  // namespace gpuxfer::cli
