#include "gpu/fixture.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

namespace gpuxfer::test {
namespace {

std::string hex(std::uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string byte_hex(std::uint8_t value) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", static_cast<unsigned>(value));
  return text;
}

// Describes the mismatches of host bytes against the pattern; @p bad is their count.
::testing::AssertionResult describe_mismatch(std::span<const std::byte> data, std::size_t bad, std::uint64_t seed,
                                             std::uint64_t offset, std::string_view what) {
  auto failure = ::testing::AssertionFailure();
  failure << what << ": " << bad << " of " << data.size() << " bytes differ from pattern seed " << hex(seed)
          << " at pattern offset " << offset;
  for (std::size_t i = 0; i < data.size(); ++i) {
    const auto want = pattern::byte_at(seed, offset + i);
    const auto got = static_cast<std::uint8_t>(data[i]);
    if (got != want) {
      failure << "; first at byte " << i << " (got " << byte_hex(got) << ", want " << byte_hex(want) << ")";
      break;
    }
  }
  return failure;
}

}  // namespace

std::string size_param_name(const ::testing::TestParamInfo<std::size_t>& info) {
  return std::to_string(info.param);
}

// --- size cap, watchdog, child processes ----------------------------------------------------------------

std::optional<std::size_t> test_max_bytes() {
  const char* text = std::getenv("GPUXFER_TEST_MAX_BYTES");
  if (text == nullptr || *text == '\0') return std::nullopt;
  try {
    return parse_size(text);
  } catch (const Error& e) {
    throw Error(Errc::invalid_option, std::string("GPUXFER_TEST_MAX_BYTES=") + text + ": " + e.message());
  }
}

std::string above_test_max(std::size_t bytes) {
  const std::optional<std::size_t> cap = test_max_bytes();
  if (!cap || bytes <= *cap) return {};
  std::ostringstream why;
  why << "size " << bytes << " above GPUXFER_TEST_MAX_BYTES=" << std::getenv("GPUXFER_TEST_MAX_BYTES") << " (" << *cap
      << " bytes)";
  return why.str();
}

std::optional<std::size_t> param_bytes() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr || info->value_param() == nullptr) return std::nullopt;
  // gtest prints a std::size_t parameter as "4095" and a tuple as "(<first>, ..., 4095)".
  std::string_view text = info->value_param();
  if (!text.empty() && text.back() == ')') text.remove_suffix(1);
  const std::size_t last = text.find_last_not_of("0123456789");
  const std::string_view digits = last == std::string_view::npos ? text : text.substr(last + 1);
  if (digits.empty()) return std::nullopt;
  if (last != std::string_view::npos && text[last] != ' ' && text[last] != '(') return std::nullopt;
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

Watchdog::Watchdog(std::chrono::seconds limit, std::string what, std::function<std::string()> state)
    : thread_([this, limit, what = std::move(what), state = std::move(state)] {
        std::unique_lock lock(mutex_);
        if (stop_.wait_for(lock, limit, [this] { return done_; })) return;
        std::ostringstream message;
        message << "[  FAILED  ] watchdog: " << what << " still running after " << limit.count()
                << " s: a deadlock or a hang";
        if (state) message << "\n" << state();
        // Both streams: ctest shows stdout, a death test's parent reads stderr.
        std::cout << message.str() << std::endl;
        std::cerr << message.str() << std::endl;
        std::_Exit(124);
      }) {}

Watchdog::~Watchdog() {
  {
    const std::lock_guard lock(mutex_);
    done_ = true;
  }
  stop_.notify_all();
  thread_.join();
}

void keep_devices_for_child_processes() {
  // tests/gpu/main.cpp maps the CTEST_RESOURCE_GROUP_* variables onto CUDA_VISIBLE_DEVICES at start-up;
  // in a child that inherited the mapped CUDA_VISIBLE_DEVICES, mapping again would index into it wrongly.
  static_cast<void>(unsetenv("CTEST_RESOURCE_GROUP_COUNT"));
}

// --- patterns -------------------------------------------------------------------------------------------

std::vector<std::byte> pattern_bytes(std::size_t bytes, std::uint64_t seed, std::uint64_t offset) {
  std::vector<std::byte> data(bytes);
  pattern::fill_host(data, seed, offset);
  return data;
}

void fill_device(int ordinal, void* ptr, std::size_t bytes, std::uint64_t seed, std::uint64_t offset) {
  if (bytes == 0) return;
  const DeviceGuard guard(ordinal);
  pattern::fill_device(ptr, bytes, seed, offset, cudaStreamLegacy);
  cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "fill_device: cudaStreamSynchronize");
}

void poison_device(int ordinal, void* ptr, std::size_t bytes) {
  const DeviceGuard guard(ordinal);
  cuda_check(cudaMemset(ptr, static_cast<int>(kPoison), bytes), "cudaMemset");
  cuda_check(cudaDeviceSynchronize(), "poison_device: cudaDeviceSynchronize");
}

void poison_pool(PinnedPool& pool, std::span<const std::size_t> sizes) {
  std::vector<HostBuffer> leases;
  for (const std::size_t bytes : sizes) {
    leases.push_back(pool.acquire(bytes));
    if (leases.back().empty()) continue;
    std::memset(leases.back().data(), static_cast<int>(kPoison), leases.back().size());
  }
}

::testing::AssertionResult host_matches(std::span<const std::byte> data, std::uint64_t seed, std::uint64_t offset,
                                        std::string_view what) {
  const std::size_t bad = pattern::count_mismatches_host(data, seed, offset);
  if (bad == 0) return ::testing::AssertionSuccess();
  return describe_mismatch(data, bad, seed, offset, what);
}

::testing::AssertionResult device_matches(int ordinal, const void* ptr, std::size_t bytes, std::uint64_t seed,
                                          std::uint64_t offset, std::string_view what) {
  if (bytes == 0) return ::testing::AssertionSuccess();
  const DeviceGuard guard(ordinal);
  const std::size_t bad = pattern::count_mismatches_device(ptr, bytes, seed, offset, cudaStreamLegacy);
  if (bad == 0) return ::testing::AssertionSuccess();
  std::vector<std::byte> copy(bytes);
  cuda_check(cudaMemcpy(copy.data(), ptr, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy for the report");
  std::ostringstream where;
  where << what << " (CUDA device " << ordinal << ")";
  return describe_mismatch(copy, bad, seed, offset, where.str());
}

::testing::AssertionResult device_holds_prefix(const DeviceMemory& mem, std::size_t bytes, std::uint64_t data_seed,
                                               std::uint64_t own_seed, const std::string& what) {
  const ::testing::AssertionResult data = device_matches(mem.ordinal(), mem.get(), bytes, data_seed, 0, what);
  const ::testing::AssertionResult rest = device_matches(mem.ordinal(), mem.get() + bytes, mem.size() - bytes,
                                                         own_seed, bytes, what + ", bytes past the data");
  if (data && rest) return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure();
  if (!data) failure << data.message();
  if (!rest) failure << (data ? "" : "; ") << rest.message();
  return failure;
}

::testing::AssertionResult pieces_are_concatenation(const std::vector<GatherPiece>& pieces,
                                                    const std::vector<GatherPiece>& expected) {
  std::vector<GatherPiece> got;
  for (const GatherPiece& p : pieces) {
    if (p.size != 0) got.push_back(p);
  }
  std::vector<GatherPiece> want;
  std::size_t offset = 0;
  for (const GatherPiece& p : expected) {
    if (p.size == 0) continue;
    want.push_back({p.device, offset, p.size});
    offset += p.size;
  }
  auto describe = [](const std::vector<GatherPiece>& list) {
    std::ostringstream text;
    for (const GatherPiece& p : list) text << " {device " << p.device << ", offset " << p.offset << ", size " << p.size << "}";
    return text.str();
  };
  bool same = got.size() == want.size();
  for (std::size_t i = 0; same && i < got.size(); ++i) {
    same = got[i].device == want[i].device && got[i].offset == want[i].offset && got[i].size == want[i].size;
  }
  if (same) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "pieces" << describe(got) << " (non-empty ones) but expected" << describe(want);
}

::testing::AssertionResult GpuTest::gathered_every_device(const std::vector<GatherPiece>& pieces,
                                                          std::span<const std::byte> out, std::size_t bytes,
                                                          const std::string& what) const {
  std::vector<GatherPiece> expected;
  for (std::size_t i = 0; i < device_count(); ++i) expected.push_back({i, 0, bytes});
  ::testing::AssertionResult laid_out = pieces_are_concatenation(pieces, expected);
  if (!laid_out) return laid_out << " (" << what << ")";
  for (std::size_t i = 0; i < device_count(); ++i) {
    ::testing::AssertionResult right =
        host_matches(out.subspan(i * bytes, bytes), seed(i), 0, what + ", device " + std::to_string(i));
    if (!right) return right;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult host_is_poison(std::span<const std::byte> data, std::string_view what) {
  const auto it = std::find_if(data.begin(), data.end(), [](std::byte b) { return b != kPoison; });
  if (it == data.end()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": byte " << (it - data.begin()) << " of " << data.size()
                                       << " was written (" << byte_hex(static_cast<std::uint8_t>(*it))
                                       << ") where nothing should have been";
}

::testing::AssertionResult still_running(int ordinal, cudaStream_t stream, std::string_view what) {
  const DeviceGuard guard(ordinal);
  const cudaError_t state = cudaStreamQuery(stream);
  if (state == cudaErrorNotReady) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": the stream's earlier work had already finished ("
                                       << cudaGetErrorName(state) << "), so the race was never open";
}

std::string failures(const std::vector<std::string>& errors) {
  std::string text;
  for (const std::string& e : errors) text += "\n  " + e;
  return text;
}

std::vector<std::string> run_threads(std::size_t threads, const std::function<void(std::size_t)>& body) {
  std::vector<std::string> errors(threads);
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        body(t);
      } catch (const std::exception& e) {
        errors[t] = "thread " + std::to_string(t) + ": " + e.what();
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  std::erase(errors, std::string());
  return errors;
}

// --- fixture --------------------------------------------------------------------------------------------

Options GpuTest::options() const {
  Options opts;
  opts.min_devices = 0;
  return opts;
}

void GpuTest::SetUp() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  run_ = std::hash<std::string>{}(std::string(info->test_suite_name()) + "." + info->name());
  // The size cap first: a sanitizer run pays for every manager it creates.
  if (const std::optional<std::size_t> bytes = param_bytes()) {
    if (const std::string why = above_test_max(*bytes); !why.empty()) GTEST_SKIP() << why;
  }

  manager_ = MultiGpuManager::create(options());
  const std::size_t found = manager_->device_count();
  if (found == 0) {
    const std::string& reason = manager_->device_status();
    GTEST_SKIP() << "no CUDA device: " << (reason.empty() ? std::string("(no reason given)") : reason);
  }
  had_devices_ = true;
  if (found < devices_needed()) {
    // Fewer GPUs than the test needs: as many simulated devices over them (Options::simulated_devices).
    Options simulated = options();
    simulated.simulated_devices = devices_needed();
    manager_ = MultiGpuManager::create(simulated);
  }
  xfer_ = std::make_unique<InterGpuTransfer>(manager_);
}

GpuTest::~GpuTest() {
  xfer_.reset();
  memory_.clear();
  manager_.reset();
  if (!had_devices_) return;
  const cudaError_t left = cudaGetLastError();  // and cleared, for the next test of this process
  EXPECT_EQ(left, cudaSuccess) << "this thread's last CUDA error at the end of the test is "
                               << cudaGetErrorName(left) << " (" << cudaGetErrorString(left)
                               << "): a call that failed left it for the next cudaGetLastError";
}

DeviceMemory& GpuTest::allocate(std::size_t index, std::size_t bytes) {
  return memory_.emplace_back(ordinal(index), bytes);
}

DeviceMemory& GpuTest::register_pattern(std::size_t index, std::size_t bytes, std::uint64_t fill_seed) {
  DeviceMemory& memory = allocate(index, bytes);
  fill_device(memory.ordinal(), memory.get(), bytes, fill_seed);
  xfer_->set_device_buffer(index, memory.get(), bytes);
  return memory;
}

}  // namespace gpuxfer::test
