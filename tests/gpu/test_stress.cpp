// GpuStress and MultiGpuStress (four devices, simulated on fewer GPUs): many threads call every operation at once on one shared manager, with random sizes from 0
// to 64 MiB (log-uniform, so mostly small), unaligned offsets and every path, and every result is checked
// byte for byte. Each thread owns an engine and a buffer on every device, and keeps a model of what each
// of its registered buffers holds (runs of pattern bytes), so that after a copy, a broadcast or a new
// registration it knows exactly what every byte on every device and in every output must be. A second
// phase shares one engine between all threads: some re-register among prepared buffers while the others
// gather, and every gathered entry must be one of those buffers whole. A third phase runs stream-ordered
// operations (stress_streams.cpp) between writes of their sources from the registering streams, queued
// right before and right behind each one with no host wait, and checks what the ordering promises.
//
// Passes when no byte is wrong, nothing throws, the pinned pool has nothing in use at the end, and the
// whole finishes before the watchdog's limit (150 s; a deadlock fails with each thread's last operation).
// GPUXFER_STRESS_THREADS (8), GPUXFER_STRESS_OPS (500 per thread), GPUXFER_STRESS_SEED (1) and
// GPUXFER_STRESS_TIMEOUT_S (150) override the defaults; GPUXFER_TEST_MAX_BYTES caps the sizes, and
// GPUXFER_NCCL=0 keeps broadcast_from_device off NCCL (as in the sanitizer run). The
// counts of operations per kind, the bytes moved and the time are printed and recorded as properties.
// The model of the buffers is in stress_model.hpp, the first phase's worker in stress_worker.cpp.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <random>
#include <sstream>

#include "gpu/stress_model.hpp"

namespace gpuxfer::test {
namespace {

using stress::Config;
using stress::run_worker;
using stress::Tally;

// --- the test ---------------------------------------------------------------------------------------------

class GpuStress : public GpuTest {
 public:
  /// Keeps a wrong result (the first 50) for the report; called by every thread.
  void record(const std::string& failure) {
    const std::lock_guard lock(mutex_);
    if (failures_.size() < 50) failures_.push_back(failure);
  }

 protected:
  /// The test: every phase on this fixture's devices.
  void every_operation_from_many_threads();

  [[nodiscard]] Options options() const override {
    Options opts = GpuTest::options();
    opts.chunk_bytes = kMiB;  // many chunks, most ending in a partial one
    // The sanitizer run keeps NCCL out (GPUXFER_NCCL=0): its path runs under every tool in gpuxfer check.
    if (const char* nccl = std::getenv("GPUXFER_NCCL"); nccl != nullptr && *nccl != '\0') {
      opts.enable_nccl = parse_bool(nccl);
    }
    return opts;
  }

  Config config_;
  std::mutex mutex_;
  std::vector<std::string> failures_;
  Tally tally_;
  std::vector<std::atomic<std::size_t>> progress_;  // per thread: operations done
  std::vector<std::atomic<const char*>> doing_;     // per thread: the operation running
};

// Prepared buffers of one device for the shared phase: distinct sizes, so a gathered entry's size says
// which one it is.
struct Candidate {
  std::unique_ptr<DeviceMemory> memory;
  std::size_t size;
  std::uint64_t seed;
};

void GpuStress::every_operation_from_many_threads() {
  const Config& cfg = config_;
  progress_ = std::vector<std::atomic<std::size_t>>(cfg.threads);
  doing_ = std::vector<std::atomic<const char*>>(cfg.threads);
  for (auto& d : doing_) d = "starting";
  const auto state = [this, &cfg] {
    std::ostringstream text;
    for (std::size_t t = 0; t < cfg.threads; ++t) {
      text << "  thread " << t << ": " << progress_[t].load() << " of " << cfg.ops << " operations done, now "
           << doing_[t].load() << "\n";
    }
    return text.str();
  };
  const Watchdog watchdog(std::chrono::seconds(cfg.timeout_s), "GpuStress", state);
  std::vector<int> ordinals;
  for (std::size_t i = 0; i < device_count(); ++i) ordinals.push_back(ordinal(i));
  std::cout << "[ stress   ] " << cfg.threads << " threads x " << cfg.ops << " operations on "
            << device_count() << " device(s), sizes 0.." << cfg.max_bytes << " bytes, seed " << cfg.seed
            << ", peers " << (manager().all_peers_enabled() ? "all" : "not all") << ", NCCL "
            << (manager().nccl_available() ? "yes" : "no") << std::endl;
  const auto start = std::chrono::steady_clock::now();

  // Phase 1: one engine per thread over the shared manager.
  const auto errors = run_threads(cfg.threads, [&](std::size_t t) {
    const Tally done = run_worker(manager_, cfg, t, ordinals, progress_[t], doing_[t],
                                  [this](const std::string& failure) { record(failure); });
    const std::lock_guard lock(mutex_);
    tally_.merge(done);
  });
  const auto phase1 = std::chrono::steady_clock::now();

  // Phase 2: one engine shared by every thread; registrations race gathers.
  std::vector<std::vector<Candidate>> candidates(device_count());
  std::mt19937_64 rng(cfg.seed);
  for (std::size_t d = 0; d < device_count(); ++d) {
    for (std::size_t k = 0; k < 3; ++k) {
      std::size_t size =
          std::uniform_int_distribution<std::size_t>(0, std::min<std::size_t>(cfg.max_bytes, 8 * kMiB))(rng);
      auto taken = [&](std::size_t s) {
        return std::any_of(candidates[d].begin(), candidates[d].end(),
                           [s](const Candidate& c) { return c.size == s; });
      };
      while (taken(size)) ++size;  // distinct sizes
      Candidate c{std::make_unique<DeviceMemory>(ordinal(d), size), size, other_seed(100 * d + k)};
      fill_device(ordinal(d), c.memory->get(), size, c.seed);
      candidates[d].push_back(std::move(c));
    }
    xfer().set_device_buffer(d, candidates[d][0].memory->get(), candidates[d][0].size);
  }
  const std::size_t shared_ops = std::max<std::size_t>(1, cfg.ops / 4);
  auto which = [&](std::size_t d, std::size_t size) -> const Candidate* {
    for (const Candidate& c : candidates[d]) {
      if (c.size == size) return &c;
    }
    return nullptr;
  };
  const auto shared_errors = run_threads(cfg.threads, [&](std::size_t t) {
    std::mt19937_64 r(cfg.seed * 7919 + t);
    Tally local;
    std::vector<std::byte> into;
    const bool registrar = cfg.threads > 1 && t % 4 == 0;
    for (std::size_t op = 0; op < shared_ops; ++op) {
      const std::size_t d = r() % device_count();
      const auto fail = [&](const std::string& why) {
        record("shared phase, thread " + std::to_string(t) + " op " + std::to_string(op) + ": " + why);
      };
      if (registrar || (cfg.threads == 1 && op % 2 == 0)) {
        doing_[t] = "shared set_device_buffer";
        const Candidate& c = candidates[d][r() % candidates[d].size()];
        xfer().set_device_buffer(d, c.memory->get(), c.size);
        local.add("shared/set_device_buffer", 0);
        continue;
      }
      const int kind = static_cast<int>(r() % 3);
      if (kind == 2) {
        doing_[t] = "shared gather_into";
        into.resize(device_count() * std::min<std::size_t>(cfg.max_bytes, 8 * kMiB + 2));
        std::size_t bytes = 0;
        for (const GatherPiece& p : xfer().gather_into(into)) {
          const Candidate* c = which(p.device, p.size);
          if (c == nullptr ||
              pattern::count_mismatches_host(std::span(into).subspan(p.offset, p.size), c->seed) != 0) {
            fail("gather_into: device " + std::to_string(p.device) + " gave " + std::to_string(p.size) +
                 " bytes that are none of its registered buffers whole");
            return;
          }
          bytes += p.size;
        }
        local.add("shared/gather_into", bytes);
        continue;
      }
      doing_[t] = kind == 0 ? "shared gather_all" : "shared gather_blocking";
      const std::vector<HostBuffer> out = kind == 0 ? xfer().gather_all() : xfer().gather_blocking(d);
      std::size_t bytes = 0;
      for (std::size_t j = 0; j < out.size(); ++j) {
        const std::size_t src = kind == 0 || j < d ? j : j + 1;
        const Candidate* c = which(src, out[j].size());
        if (c == nullptr || pattern::count_mismatches_host(out[j].span(), c->seed) != 0) {
          fail("gather: device " + std::to_string(src) + " gave " + std::to_string(out[j].size()) +
               " bytes that are none of its registered buffers whole");
          return;
        }
        bytes += out[j].size();
      }
      local.add(kind == 0 ? "shared/gather_all" : "shared/gather_blocking", bytes);
    }
    doing_[t] = "done";
    const std::lock_guard lock(mutex_);
    tally_.merge(local);
  });
  const auto phase2 = std::chrono::steady_clock::now();

  // Phase 3: stream-ordered operations between the producers' writes, one engine per thread.
  for (auto& p : progress_) p = 0;
  const auto stream_errors = run_threads(cfg.threads, [&](std::size_t t) {
    const Tally done = stress::run_stream_worker(manager_, cfg, t, ordinals, progress_[t], doing_[t],
                                                 [this](const std::string& failure) { record(failure); });
    const std::lock_guard lock(mutex_);
    tally_.merge(done);
  });
  const auto end = std::chrono::steady_clock::now();

  EXPECT_TRUE(stream_errors.empty()) << stream_errors.size()
                                     << " threads threw in phase 3; first: " << stream_errors.front();
  EXPECT_TRUE(errors.empty()) << errors.size() << " threads threw in phase 1; first: " << errors.front();
  EXPECT_TRUE(shared_errors.empty()) << shared_errors.size()
                                     << " threads threw in phase 2; first: " << shared_errors.front();
  for (const std::string& f : failures_) ADD_FAILURE() << f;

  // Nothing leased is left: every HostBuffer and staging chunk went back.
  xfer_.reset();
  for (std::size_t i = 0; i < device_count(); ++i) {
    const DeviceGuard guard(ordinal(i));
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  const PoolStats pool = manager().pinned_pool().stats();
  EXPECT_EQ(pool.in_use, 0u) << "pinned bytes still leased at the end";

  std::size_t ops = 0;
  std::size_t bytes = 0;
  std::cout << "[ stress   ] " << std::left << std::setw(36) << "operation" << std::right << std::setw(8)
            << "count" << std::setw(16) << "bytes"
            << "\n";
  for (const auto& [kind, v] : tally_.by_kind) {
    std::cout << "[ stress   ] " << std::left << std::setw(36) << kind << std::right << std::setw(8)
              << v.first << std::setw(16) << v.second << "\n";
    std::string key = "ops_" + kind;
    std::replace(key.begin(), key.end(), '/', '_');  // property names are XML attribute names
    RecordProperty(key, std::to_string(v.first));
    ops += v.first;
    bytes += v.second;
  }
  const double seconds = std::chrono::duration<double>(end - start).count();
  std::cout << "[ stress   ] total: " << ops << " operations, " << bytes << " bytes moved (" << std::fixed
            << std::setprecision(1) << static_cast<double>(bytes) / 1e9 << " GB) in " << seconds
            << " s (phase 1 " << std::chrono::duration<double>(phase1 - start).count() << " s, stream-ordered phase "
            << std::chrono::duration<double>(end - phase2).count() << " s); wrong bytes: " << (failures_.empty() ? "0" : "SOME")
            << "; pinned pool at the end: in use " << pool.in_use << ", cached " << pool.cached
            << ", pending " << pool.pending << ", peak in use " << pool.peak_in_use << ", allocations "
            << pool.allocations << std::endl;
  RecordProperty("threads", std::to_string(cfg.threads));
  RecordProperty("ops_per_thread", std::to_string(cfg.ops));
  RecordProperty("devices", std::to_string(device_count()));
  RecordProperty("operations", std::to_string(ops));
  RecordProperty("bytes_moved", std::to_string(bytes));
  RecordProperty("seconds", std::to_string(seconds));
  RecordProperty("pool_in_use_at_end", std::to_string(pool.in_use));
  RecordProperty("failures", std::to_string(failures_.size()));
}

// On every GPU of the machine, and on four devices (simulated where there are fewer GPUs).
class MultiGpuStress : public GpuStress {
 protected:
  [[nodiscard]] std::size_t devices_needed() const override { return 4; }
};

TEST_F(GpuStress, EveryOperationFromManyThreadsDeliversEveryByte) { every_operation_from_many_threads(); }
TEST_F(MultiGpuStress, EveryOperationFromManyThreadsDeliversEveryByte) { every_operation_from_many_threads(); }

}  // namespace
}  // namespace gpuxfer::test
