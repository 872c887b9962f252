// Device faults: a kernel that writes through an illegal address on device d leaves d's context with a
// sticky error (cudaErrorIllegalAddress). Every later gpuxfer operation that involves d must then throw
// Errc::device_fault with a message naming d, at once (no hang), and give back the pinned memory it
// leased. A sticky error cannot be undone within a process, so the fault happens in a child: a
// "threadsafe" death test re-runs this binary for the one test. The child prints one line per operation
// to stderr and the marker line when every one behaved; it exits 0 only then. A watchdog ends a child
// that hangs, another one the parent.
//
// Buffers freed after registration: test_registry.cpp (gather_all, broadcast, copy_buffer, gather_into)
// and test_bad_input.cpp (every other operation) check their Errc::invalid_buffer and message.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "gpu/fault_kernel.hpp"
#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kBytes = kMiB + 5;
constexpr auto kChildLimit = std::chrono::seconds(60);
constexpr auto kParentLimit = std::chrono::seconds(120);

// "device 1" or "ordinal 1" (as in "device ordinal 1"), as a whole number.
bool names_device(const std::string& text, std::size_t device) {
  const std::regex named("(device|ordinal) " + std::to_string(device) + "([^0-9]|$)");
  return std::regex_search(text, named);
}

void say(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

template <class Base>
class FaultTest : public Base {
 protected:
  // Runs in the child: registers a buffer on every device, faults device @p faulty, then runs every
  // operation that involves it. Never returns: exits 0 when every operation threw device_fault naming
  // the device, else 1.
  [[noreturn]] void run_child(std::size_t faulty) {
    const Watchdog watchdog(kChildLimit, "the fault child of device " + std::to_string(faulty));
    const std::size_t count = this->device_count();
    const std::size_t other = count > 1 ? (faulty + 1) % count : faulty;
    for (std::size_t i = 0; i < count; ++i) this->register_pattern(i, kBytes);
    DeviceMemory& out = this->allocate(faulty, kBytes * count);
    DeviceMemory& spare = this->allocate(faulty, kBytes);
    const std::vector<std::byte> data = pattern_bytes(kBytes, this->other_seed(0));
    std::vector<std::byte> host(kBytes * count);

    bool ok = true;
    {
      const DeviceGuard guard(this->ordinal(faulty));
      cudaStream_t stream = nullptr;
      cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      const cudaError_t launched =
          launch_illegal_write(reinterpret_cast<void*>(std::uintptr_t{0x10}), stream);
      const cudaError_t synced = cudaStreamSynchronize(stream);
      say("fault on device " + std::to_string(faulty) + ": launch " + cudaGetErrorName(launched) +
          ", cudaStreamSynchronize " + cudaGetErrorName(synced));
      if (synced != cudaErrorIllegalAddress) {
        say("FAIL: the kernel did not fault with cudaErrorIllegalAddress");
        ok = false;
      }
    }

    std::vector<std::pair<std::string, std::function<void()>>> operations = {
        {"gather_all", [&] { (void)this->xfer().gather_all(); }},
        {"gather_into (pageable)", [&] { (void)this->xfer().gather_into(host); }},
        {"broadcast (pageable)", [&] { this->xfer().broadcast(data); }},
        {"copy_buffer into it", [&] { this->xfer().copy_buffer(other, faulty, data); }},
        {"gather_to_device onto it",
         [&] { (void)this->xfer().gather_to_device(faulty, out.get(), out.size()); }},
        {"gather_slices from it",
         [&] {
           const DeviceSlice slices[] = {{faulty, spare.get(), 4096}};
           (void)this->xfer().gather_slices(slices, host);
         }},
        {"set_device_buffer on it",
         [&] { this->xfer().set_device_buffer(faulty, spare.get(), spare.size()); }},
    };
    if (count > 1) {
      operations.emplace_back("gather_blocking to another device",
                              [&] { (void)this->xfer().gather_blocking(other); });
      operations.emplace_back("gather (handle) to another device",
                              [&] { (void)this->xfer().gather(other).get(); });
      operations.emplace_back("copy_device_buffer staged into it",
                              [&] { this->xfer().copy_device_buffer(other, faulty, CopyPath::staged); });
      operations.emplace_back("copy_device_buffer automatic from it",
                              [&] { this->xfer().copy_device_buffer(faulty, other); });
      operations.emplace_back("broadcast_from_device peer onto it",
                              [&] { this->xfer().broadcast_from_device(other, DeviceBroadcastPath::peer); });
    }
    for (const auto& [name, operation] : operations) {
      try {
        operation();
        say("FAIL " + name + ": did not throw");
        ok = false;
      } catch (const Error& e) {
        const bool right = e.code() == Errc::device_fault && names_device(e.what(), faulty);
        say(std::string(right ? "ok   " : "FAIL ") + name + ": " + e.what());
        ok = ok && right;
      } catch (const std::exception& e) {
        say("FAIL " + name + ": not a gpuxfer::Error: " + e.what());
        ok = false;
      }
    }

    // Whatever the failed operations leased is back (or waiting only for GPU work that ended).
    const PoolStats stats = this->manager().pinned_pool().stats();
    say("pinned pool after the faults: in use " + std::to_string(stats.in_use) + ", pending " +
        std::to_string(stats.pending) + ", cached " + std::to_string(stats.cached));
    if (stats.in_use != 0) {
      say("FAIL: pinned memory still in use after the failed operations");
      ok = false;
    }
    if (count > 1) {
      // For the record, not a requirement: contexts are per device, so the other device should still work.
      try {
        InterGpuTransfer healthy(this->manager_);
        DeviceMemory& mem = this->register_pattern(other, 4096);
        healthy.set_device_buffer(other, mem.get(), mem.size());
        const auto gathered = healthy.gather_all();
        say("info: device " + std::to_string(other) + " alone still works: " +
            (pattern::count_mismatches_host(gathered[other].span(), this->seed(other)) == 0 ? "yes"
                                                                                            : "wrong bytes"));
      } catch (const std::exception& e) {
        say("info: device " + std::to_string(other) + " alone fails too: " + e.what());
      }
    }
    if (ok) say("GPUXFER_FAULT_SURVIVED device " + std::to_string(faulty));
    std::fflush(stdout);
    // No destructors: the faulted context may not tear down cleanly, and the verdict is already out.
    std::_Exit(ok ? 0 : 1);
  }

  void expect_child_survives(std::size_t faulty) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    keep_devices_for_child_processes();
    const Watchdog watchdog(kParentLimit, "the fault death test of device " + std::to_string(faulty));
    EXPECT_EXIT(run_child(faulty), ::testing::ExitedWithCode(0),
                "GPUXFER_FAULT_SURVIVED device " + std::to_string(faulty));
  }
};

// Death tests run first (gtest orders suites named *DeathTest before the others).
using GpuFaultDeathTest = FaultTest<GpuTest>;
using MultiGpuFaultDeathTest = FaultTest<MultiGpuTest>;

TEST_F(GpuFaultDeathTest, IllegalAddressMakesEveryNextOperationADeviceFault) { expect_child_survives(0); }

// The fault on the second device: messages must name device 1, not the first device they touched.
TEST_F(MultiGpuFaultDeathTest, FaultOnTheSecondDeviceIsNamed) { expect_child_survives(1); }

}  // namespace
}  // namespace gpuxfer::test
