// A few threads at once (the long stress test lives elsewhere): shared engine readers, separate
// engines on one manager writing, and a registration racing a gather (one consistent snapshot).
#include <atomic>
#include <barrier>
#include <mutex>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kThreads = 4;
constexpr int kRounds = 6;

using GpuThreads = SmallChunks<GpuTest>;
using MultiGpuThreads = SmallChunks<MultiGpuTest>;

// Each round the threads gather at once; between rounds the sources are rewritten with the next round's
// seeds, so that a result block the pool hands out again holds another round's bytes. Each result is also
// poisoned before it goes back, so that a gather of the same round cannot find its bytes there either.
TEST_F(GpuThreads, ConcurrentGathersOfOneEngine) {
  const auto size_of = [](std::size_t i) { return 8 * kMiB + 1 + i; };
  const auto round_seed = [&](int round, std::size_t i) {
    return other_seed(static_cast<std::uint64_t>(round) * device_count() + i);
  };
  std::vector<DeviceMemory*> memory;
  std::vector<GatherPiece> expected;
  std::size_t total = 0;
  for (std::size_t i = 0; i < device_count(); ++i) {
    memory.push_back(&register_pattern(i, size_of(i), round_seed(0, i)));
    expected.push_back({i, 0, size_of(i)});
    total += size_of(i);
  }
  std::mutex mutex;
  std::vector<std::string> wrong;
  const auto record = [&](const std::string& what) {
    const std::lock_guard lock(mutex);
    wrong.push_back(what);
  };
  std::atomic<int> rounds_done{0};
  std::barrier next_round(static_cast<std::ptrdiff_t>(kThreads), [&]() noexcept {
    const int next = rounds_done.load() + 1;
    try {
      for (std::size_t i = 0; i < memory.size() && next < kRounds; ++i) {
        fill_device(memory[i]->ordinal(), memory[i]->get(), memory[i]->size(), round_seed(next, i));
      }
    } catch (const std::exception& e) {
      record(std::string("refilling the sources: ") + e.what());
    }
    rounds_done = next;
  });
  const auto errors = run_threads(kThreads, [&](std::size_t t) {
    try {
      for (int r = 0; r < kRounds; ++r) {
        const std::string who = "thread " + std::to_string(t) + " round " + std::to_string(r);
        if ((t + static_cast<std::size_t>(r)) % 2 == 0) {
          std::vector<HostBuffer> out = xfer().gather_all();
          if (out.size() != device_count())
            record(who + ": gather_all gave " + std::to_string(out.size()) + " buffers");
          for (std::size_t i = 0; i < out.size(); ++i) {
            const std::string what = who + ": gather_all, device " + std::to_string(i);
            if (out[i].size() != size_of(i)) {
              record(what + ": " + std::to_string(out[i].size()) + " bytes");
            } else if (const auto same = host_matches(out[i].span(), round_seed(r, i), 0, what); !same) {
              record(same.message());
            }
            std::fill(out[i].span().begin(), out[i].span().end(), kPoison);
          }
        } else {
          std::vector<std::byte> into(total + 4096, kPoison);
          const std::vector<GatherPiece> pieces = xfer().gather_into(into);
          if (const auto same = pieces_are_concatenation(pieces, expected); !same)
            record(who + ": gather_into: " + same.message());
          for (std::size_t i = 0, at = 0; i < device_count(); at += size_of(i), ++i) {
            const auto same = host_matches(std::span(into).subspan(at, size_of(i)), round_seed(r, i), 0,
                                           who + ": gather_into, device " + std::to_string(i));
            if (!same) record(same.message());
          }
          if (const auto tail =
                  host_is_poison(std::span(into).subspan(total), who + ": gather_into past the data");
              !tail)
            record(tail.message());
        }
        next_round.arrive_and_wait();
      }
    } catch (...) {
      next_round.arrive_and_drop();  // the others' rounds go on without this thread
      throw;
    }
  });
  EXPECT_TRUE(errors.empty()) << failures(errors);
  EXPECT_TRUE(wrong.empty()) << failures(wrong);
  EXPECT_EQ(rounds_done.load(), kRounds) << "rounds completed";
}

// Each thread owns an engine and buffers on every device, and broadcasts then gathers its own data.
TEST_F(GpuThreads, SeparateEnginesBroadcastAndGatherAtOnce) {
  std::mutex mutex;
  std::vector<std::string> wrong;
  const auto errors = run_threads(kThreads, [&](std::size_t t) {
    std::vector<DeviceMemory> memory;
    for (std::size_t i = 0; i < device_count(); ++i) memory.emplace_back(ordinal(i), 6 * kMiB);
    InterGpuTransfer engine(manager_);  // destroyed before the memory it points to
    for (std::size_t i = 0; i < device_count(); ++i) {
      engine.set_device_buffer(i, memory[i].get(), memory[i].size());
    }
    for (int round = 0; round < kRounds; ++round) {
      const std::uint64_t data_seed = pattern::seed_for(run_ + 100 * t + static_cast<std::uint64_t>(round), 77);
      const auto data = pattern_bytes(6 * kMiB - static_cast<std::size_t>(round), data_seed);
      engine.broadcast(data, round % 2 == 0 ? HostBroadcastPath::automatic : HostBroadcastPath::per_device);
      const auto out = engine.gather_all();
      if (out.size() != device_count()) {
        const std::lock_guard lock(mutex);
        wrong.push_back("thread " + std::to_string(t) + " round " + std::to_string(round) +
                        ": gather_all gave " + std::to_string(out.size()) + " buffers for " +
                        std::to_string(device_count()) + " devices");
      }
      for (std::size_t i = 0; i < out.size(); ++i) {
        const std::size_t n = pattern::count_mismatches_host(out[i].span().first(data.size()), data_seed);
        if (n != 0) {
          const std::lock_guard lock(mutex);
          wrong.push_back("thread " + std::to_string(t) + " round " + std::to_string(round) + " device " +
                          std::to_string(i) + ": " + std::to_string(n) + " bytes wrong");
        }
      }
    }
  });
  EXPECT_TRUE(errors.empty()) << failures(errors);
  EXPECT_TRUE(wrong.empty()) << failures(wrong);
}

// While one thread swaps device 0's registration between two buffers, gathers see one or the other
// whole, never a mix of one's pointer and the other's size.
TEST_F(GpuThreads, RegistrationRacingAGatherSeesOneSnapshot) {
  const std::size_t size_a = 2 * kMiB + 1;
  const std::size_t size_b = 3 * kMiB + 3;
  DeviceMemory& a = allocate(0, size_a);
  DeviceMemory& b = allocate(0, size_b);
  fill_device(a.ordinal(), a.get(), size_a, other_seed(1));
  fill_device(b.ordinal(), b.get(), size_b, other_seed(2));
  xfer().set_device_buffer(0, a.get(), size_a);
  std::atomic<bool> done{false};
  std::atomic<std::size_t> bad{0};
  const auto errors = run_threads(2, [&](std::size_t t) {
    if (t == 0) {
      for (int k = 0; k < 400 && !done; ++k) {
        if (k % 2 == 0) {
          xfer().set_device_buffer(0, b.get(), size_b);
        } else {
          xfer().set_device_buffer(0, a.get(), size_a);
        }
      }
    } else {
      for (int k = 0; k < 40; ++k) {
        const auto out = xfer().gather_all();
        const HostBuffer& got = out[0];
        if (got.size() == size_a) {
          bad += pattern::count_mismatches_host(got.span(), other_seed(1));
        } else if (got.size() == size_b) {
          bad += pattern::count_mismatches_host(got.span(), other_seed(2));
        } else {
          bad += 1;
        }
      }
      done = true;
    }
  });
  EXPECT_TRUE(errors.empty()) << failures(errors);
  EXPECT_EQ(bad.load(), 0u);
}

TEST_F(MultiGpuThreads, CopiesBothWaysAtOnceOnSeparateEngines) {
  std::mutex mutex;
  std::vector<std::string> wrong;
  const auto errors = run_threads(kThreads, [&](std::size_t t) {
    const std::size_t src = t % 2;
    const std::size_t dst = 1 - src;
    const CopyPath path = t < 2 ? CopyPath::automatic : CopyPath::staged;
    DeviceMemory from(ordinal(src), 5 * kMiB + 3);
    DeviceMemory to(ordinal(dst), 5 * kMiB + 3);
    InterGpuTransfer engine(manager_);  // destroyed before the memory it points to
    engine.set_device_buffer(src, from.get(), from.size());
    engine.set_device_buffer(dst, to.get(), to.size());
    for (int round = 0; round < kRounds; ++round) {
      const std::uint64_t data_seed = pattern::seed_for(run_ + 100 * t + static_cast<std::uint64_t>(round), 99);
      fill_device(from.ordinal(), from.get(), from.size(), data_seed);
      engine.copy_device_buffer(src, dst, path);
      const DeviceGuard guard(to.ordinal());
      const std::size_t n = pattern::count_mismatches_device(to.get(), to.size(), data_seed, 0, cudaStreamLegacy);
      if (n != 0) {
        const std::lock_guard lock(mutex);
        wrong.push_back("thread " + std::to_string(t) + " round " + std::to_string(round) + ": " +
                        std::to_string(n) + " bytes wrong");
      }
    }
  });
  EXPECT_TRUE(errors.empty()) << failures(errors);
  EXPECT_TRUE(wrong.empty()) << failures(wrong);
}

}  // namespace
}  // namespace gpuxfer::test
