/// @file fixture.hpp
/// @brief What every GPU test shares: the fixture that skips without devices, RAII CUDA memory and
///        streams, and pattern fill / poison / verify helpers that say where the data went wrong.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <gpuxfer/gpuxfer.hpp>
#include <gpuxfer/testing/cuda_resources.hpp>
#include <gpuxfer/testing/pattern.hpp>

#include "common/expect_error.hpp"

namespace gpuxfer::test {

inline constexpr std::size_t kKiB = std::size_t{1} << 10;
inline constexpr std::size_t kMiB = std::size_t{1} << 20;
/// The byte every output is poisoned with before a transfer writes it.
inline constexpr std::byte kPoison{0xA5};

/// Sizes the data tests run: empty, tiny and odd, just under a page, past a chunk, and large.
inline constexpr std::array<std::size_t, 6> kSizes{0, 1, 3, 4095, kMiB + 7, 256 * kMiB};

/// The largest buffer a test may use: GPUXFER_TEST_MAX_BYTES parsed with parse_size ("4MiB"), set by the
/// sanitizer runs, where every byte costs; nullopt when unset. @throws Error(Errc::invalid_option) for a
/// value that does not parse
[[nodiscard]] std::optional<std::size_t> test_max_bytes();

/// "size N above GPUXFER_TEST_MAX_BYTES=... (M bytes)" when @p bytes is above the cap, else an empty string.
[[nodiscard]] std::string above_test_max(std::size_t bytes);

/// The byte count a size-parameterised test runs with: its parameter when that is a number, else the
/// last element of its tuple parameter when that is one (every size-parameterised test here puts the
/// size last); nullopt for other tests. GpuTest::SetUp skips tests whose size is above test_max_bytes().
[[nodiscard]] std::optional<std::size_t> param_bytes();

/// Skips the current test when devices @p a and @p b are simulated devices of one GPU: for what only
/// separate GPUs have (peer mappings between GPUs, NCCL between devices, two links' bandwidth). @p why
/// says what the test needs.
#define GPUXFER_SKIP_ON_ONE_GPU(a, b, why)                                                      \
  if (!this->same_gpu(a, b)) {                                                                 \
  } else                                                                                       \
    GTEST_SKIP() << "needs separate GPUs (" << (why) << "); devices " << (a) << " and " << (b) \
                 << " are simulated on one"

/// Skips the current test (GTEST_SKIP returns from the calling function) when @p bytes is above
/// GPUXFER_TEST_MAX_BYTES: for tests whose large size is not their parameter.
#define GPUXFER_SKIP_ABOVE_TEST_MAX(bytes)                                                   \
  if (const std::string gpuxfer_why_ = ::gpuxfer::test::above_test_max(bytes); gpuxfer_why_.empty()) { \
  } else                                                                                     \
    GTEST_SKIP() << gpuxfer_why_

/// Ends the process, saying why, when the scope it guards runs past its limit: a test that deadlocks
/// fails with a message instead of holding the run until ctest's timeout. The message names @p what and
/// adds what @p state says (for example each thread's current operation).
class Watchdog {
 public:
  Watchdog(std::chrono::seconds limit, std::string what, std::function<std::string()> state = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable stop_;
  bool done_ = false;
  std::thread thread_;
};

/// Lets a child process of this test (a "threadsafe" death test re-runs the binary) see the same GPUs:
/// CUDA_VISIBLE_DEVICES already holds what ctest's resource groups asked for, so the child must not
/// map the CTEST_RESOURCE_GROUP_* variables a second time.
void keep_devices_for_child_processes();

/// Names a size-parameterised test by its byte count ("Bytes/GpuGatherBySize.GatherAll/4095").
std::string size_param_name(const ::testing::TestParamInfo<std::size_t>& info);

// The CUDA resources and check of gpuxfer_testing (std::runtime_error, never gpuxfer::Error, so that a
// fixture failure cannot pass for the library error a test expects).
using testing::cuda_check;
using testing::DeviceGuard;
using testing::DeviceMemory;
using testing::PinnedMemory;
using testing::Stream;

/// Pattern bytes [offset, offset + bytes) of @p seed in ordinary (pageable) memory.
std::vector<std::byte> pattern_bytes(std::size_t bytes, std::uint64_t seed, std::uint64_t offset = 0);

/// Writes pattern bytes [offset, offset + bytes) to device memory and waits until they are there.
void fill_device(int ordinal, void* ptr, std::size_t bytes, std::uint64_t seed, std::uint64_t offset = 0);
/// Sets @p bytes of device memory to kPoison and waits until they are.
void poison_device(int ordinal, void* ptr, std::size_t bytes);
/// Leases blocks of the given sizes from @p pool, poisons them and gives them back, so that a transfer
/// that reuses a cached block and writes nothing into it is caught.
void poison_pool(PinnedPool& pool, std::span<const std::size_t> sizes);

/// Every byte of @p data equals pattern bytes [offset, ...) of @p seed. The failure names @p what,
/// the size, the seed, the number of bad bytes and the first bad offset.
::testing::AssertionResult host_matches(std::span<const std::byte> data, std::uint64_t seed,
                                        std::uint64_t offset, std::string_view what);
/// As host_matches for @p bytes of device memory on @p ordinal (counted on the GPU, on the legacy
/// default stream: data a blocking transfer delivered must be visible there without more synchronisation).
::testing::AssertionResult device_matches(int ordinal, const void* ptr, std::size_t bytes, std::uint64_t seed,
                                          std::uint64_t offset, std::string_view what);
/// Device memory @p mem holds pattern bytes [0, bytes) of @p data_seed and, past them, bytes [bytes, size) of
/// its own pattern @p own_seed: what a copy or a broadcast of @p bytes leaves in a longer buffer. Both
/// parts are checked; the failure names @p what and each part that differs.
::testing::AssertionResult device_holds_prefix(const DeviceMemory& mem, std::size_t bytes, std::uint64_t data_seed,
                                               std::uint64_t own_seed, const std::string& what);
/// @p pieces say that the buffers of @p expected ({device, size}, ascending) were concatenated in
/// that order from offset 0. Zero-size pieces are ignored on both sides.
::testing::AssertionResult pieces_are_concatenation(const std::vector<GatherPiece>& pieces,
                                                    const std::vector<GatherPiece>& expected);
/// Every byte of @p data is kPoison (memory no transfer should have touched).
::testing::AssertionResult host_is_poison(std::span<const std::byte> data, std::string_view what);
/// @p stream of CUDA device @p ordinal still has work to run (cudaStreamQuery says not ready): a race test
/// asserts it right before a blocking call, or right after a stream-ordered one returned, to show that the
/// call ran inside the window its slow producer opened. A first cudaHostAlloc of the pool, an NCCL set-up
/// or an allocation of the test itself would otherwise close the window unseen (each may synchronise).
::testing::AssertionResult still_running(int ordinal, cudaStream_t stream, std::string_view what);
/// Leases @p pool has served: a path that stages leases at least one block, a direct one none.
inline std::size_t leases(PinnedPool& pool) {
  const PoolStats s = pool.stats();
  return s.allocations + s.reuses;
}

/// A test with a MultiGpuManager (min_devices 0) and an InterGpuTransfer. Skips with the CUDA reason
/// when there is no device; where a subclass needs more devices than there are GPUs, its manager has
/// that many simulated devices over them (Options::simulated_devices).
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override;
  /// Drops the transfer, the memory and the manager, in that order, then fails the test when a CUDA
  /// call on this thread, in gpuxfer or the test, failed and left its error for the next
  /// cudaGetLastError: a caller's check after its own kernel launch would report it as the launch's.
  ~GpuTest() override;

  /// Devices the test needs; MultiGpu fixtures say 2.
  [[nodiscard]] virtual std::size_t devices_needed() const { return 1; }
  /// The manager's options: the built-in defaults with min_devices 0 (the environment is ignored so
  /// every run tests the same configuration).
  [[nodiscard]] virtual Options options() const;

  [[nodiscard]] std::size_t device_count() const { return manager_->device_count(); }
  /// Devices @p a and @p b are simulated devices of one GPU (LinkKind::same_gpu).
  [[nodiscard]] bool same_gpu(std::size_t a, std::size_t b) const {
    return a != b && manager_->link(a, b) == LinkKind::same_gpu;
  }
  [[nodiscard]] int ordinal(std::size_t index) const { return manager_->device(index).ordinal; }
  /// This test's pattern seed for device @p index; differs between devices and between tests.
  [[nodiscard]] std::uint64_t seed(std::size_t index) const { return pattern::seed_for(run_, index); }
  /// A seed of this test unrelated to any device's (host data, second generations).
  [[nodiscard]] std::uint64_t other_seed(std::uint64_t n) const { return pattern::seed_for(run_ + 1 + n, 1000); }

  /// Allocates @p bytes on device @p index; the fixture keeps it alive until the transfer is gone.
  DeviceMemory& allocate(std::size_t index, std::size_t bytes);
  /// Allocates @p bytes on device @p index, fills them with @p fill_seed and registers them.
  DeviceMemory& register_pattern(std::size_t index, std::size_t bytes, std::uint64_t fill_seed);
  /// register_pattern(index, bytes, seed(index)).
  DeviceMemory& register_pattern(std::size_t index, std::size_t bytes) {
    return register_pattern(index, bytes, seed(index));
  }

  /// What gather_into of @p bytes from every device gives: @p pieces concatenate device 0, 1, ... from
  /// offset 0, and @p out holds each device's pattern seed(i) there. Failures name @p what and the device.
  ::testing::AssertionResult gathered_every_device(const std::vector<GatherPiece>& pieces,
                                                   std::span<const std::byte> out, std::size_t bytes,
                                                   const std::string& what) const;

  InterGpuTransfer& xfer() { return *xfer_; }
  MultiGpuManager& manager() { return *manager_; }

  std::uint64_t run_ = 0;
  bool had_devices_ = false;  ///< SetUp found a device (the last-error check runs only then)
  std::shared_ptr<MultiGpuManager> manager_;
  std::deque<DeviceMemory> memory_;  // destroyed after xfer_
  std::unique_ptr<InterGpuTransfer> xfer_;
};

/// A test that needs two devices (simulated ones on one GPU). Suites derived from it must be named
/// MultiGpu* (ctest labels them multi_gpu and gives them two GPUs where there are two).
class MultiGpuTest : public GpuTest {
 protected:
  [[nodiscard]] std::size_t devices_needed() const override { return 2; }
};

/// Chunk size of the managers of pipelined-path tests: small, so the sizes above span many chunks and
/// most of them end in a partial one.
inline constexpr std::size_t kSmallChunk = kMiB;

/// @p Base with its manager's options changed by @p change.
template <class Base, void (*change)(Options&)>
class WithOptions : public Base {
 protected:
  [[nodiscard]] Options options() const override {
    Options opts = Base::options();
    change(opts);
    return opts;
  }
};

inline void use_small_chunks(Options& opts) { opts.chunk_bytes = kSmallChunk; }

/// @p Base with Options::chunk_bytes = kSmallChunk.
template <class Base>
using SmallChunks = WithOptions<Base, use_small_chunks>;

/// @p Base parameterised by a size n: device i registers n + 13 * i bytes of its pattern (nothing for
/// n = 0), so that a swapped or truncated entry of a gather shows.
template <class Base>
class PerDeviceSizes : public Base, public ::testing::WithParamInterface<std::size_t> {
 protected:
  [[nodiscard]] std::size_t size_of(std::size_t index) const {
    return this->GetParam() == 0 ? 0 : this->GetParam() + 13 * index;
  }

  void register_all() {
    for (std::size_t i = 0; i < this->device_count(); ++i) this->register_pattern(i, size_of(i));
  }

  /// The buffers a gather of every device but @p skip concatenates: {device, 0, size}, ascending.
  [[nodiscard]] std::vector<GatherPiece> expected(std::optional<std::size_t> skip = std::nullopt) const {
    std::vector<GatherPiece> want;
    for (std::size_t i = 0; i < this->device_count(); ++i) {
      if (i != skip) want.push_back({i, 0, size_of(i)});
    }
    return want;
  }

  /// The bytes of that concatenation.
  [[nodiscard]] std::size_t total(std::optional<std::size_t> skip = std::nullopt) const {
    std::size_t sum = 0;
    for (const GatherPiece& p : expected(skip)) sum += p.size;
    return sum;
  }
};

/// A fixture template whose tests run on one GPU and on two: Gpu<Fixture> is Fixture<GpuTest> (one GPU or
/// more), MultiGpu<Fixture> is Fixture<MultiGpuTest> (ctest gives its tests two GPUs).
#define GPUXFER_GPU_AND_MULTI_GPU(Fixture) \
  using Gpu##Fixture = Fixture<GpuTest>;   \
  using MultiGpu##Fixture = Fixture<MultiGpuTest>

/// Test @p Name of both suites of GPUXFER_GPU_AND_MULTI_GPU(Fixture); each runs the fixture's @p check().
#define GPUXFER_TEST_P_ON_BOTH(Fixture, Name, check) \
  TEST_P(Gpu##Fixture, Name) { check(); }            \
  TEST_P(MultiGpu##Fixture, Name) { check(); }

/// Instantiates both suites of GPUXFER_GPU_AND_MULTI_GPU(Fixture) as Bytes/... over @p values.
#define GPUXFER_INSTANTIATE_ON_BOTH(Fixture, values, namer)       \
  INSTANTIATE_TEST_SUITE_P(Bytes, Gpu##Fixture, values, namer);   \
  INSTANTIATE_TEST_SUITE_P(Bytes, MultiGpu##Fixture, values, namer)

/// Runs @p body on @p threads threads at once and joins them; returns what each one threw.
std::vector<std::string> run_threads(std::size_t threads, const std::function<void(std::size_t)>& body);

/// @p errors one per line, for a failure message.
[[nodiscard]] std::string failures(const std::vector<std::string>& errors);

}  // namespace gpuxfer::test
