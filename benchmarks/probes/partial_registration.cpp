// gpuxfer-probe-partial-registration: whether registering part of a pageable destination per call could
// lift gather_into past the host-copy bound. It times cudaHostRegister and cudaHostUnregister alone by
// size, then a 256 MiB gather from device 0 into pageable memory split in two: the head through gpuxfer's
// bounce path (gather_into of a buffer registered as the head of the device allocation), the tail
// registered on a second thread, copied straight into with one cudaMemcpyAsync, and unregistered, both at
// once. A tail of 0 is today's gather_into. Medians in microseconds; every byte is checked after each
// sample, over a destination zeroed before it.
//
//   gpuxfer-probe-partial-registration    (device 0; its size is fixed at 256 MiB)
//
// Exit 0 when the bytes were right, 1 otherwise, 2 without a GPU.
#include <gpuxfer/gpuxfer.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include <unistd.h>

#include "probes/probe.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t mib = std::size_t{1} << 20;
constexpr std::size_t total_bytes = 256 * mib;

using gpuxfer::probe::check;
using gpuxfer::probe::median;

double micros(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

struct DeviceMemory {
  std::byte* ptr = nullptr;
  explicit DeviceMemory(std::size_t bytes) {
    check(cudaMalloc(reinterpret_cast<void**>(&ptr), bytes), "cudaMalloc");
  }
  ~DeviceMemory() { cudaFree(ptr); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
};

// cudaHostRegister and cudaHostUnregister of the first @p bytes of @p memory, alone: medians of 5.
void time_registration(std::span<std::byte> memory, std::size_t bytes) {
  std::vector<double> register_us, unregister_us;
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    check(cudaHostRegister(memory.data(), bytes, cudaHostRegisterPortable), "cudaHostRegister");
    const auto registered = Clock::now();
    check(cudaHostUnregister(memory.data()), "cudaHostUnregister");
    register_us.push_back(micros(start, registered));
    unregister_us.push_back(micros(registered, Clock::now()));
  }
  std::printf("alone: cudaHostRegister %4zu MiB %8.1f us, cudaHostUnregister %8.1f us\n", bytes / mib,
              median(register_us), median(unregister_us));
}

struct SplitTimes {
  double total = 0, head = 0, tail_register = 0, tail_copy = 0, tail_unregister = 0;
};

// One split gather: the head through gather_into, the last @p tail_bytes registered and copied straight
// into on a second thread.
SplitTimes split_gather(gpuxfer::InterGpuTransfer& transfer, int ordinal, const DeviceMemory& source,
                        std::span<std::byte> out, std::size_t tail_bytes, cudaStream_t stream) {
  const std::size_t head_bytes = out.size() - tail_bytes;
  SplitTimes t;
  const auto start = Clock::now();
  std::thread tail;
  if (tail_bytes > 0) {
    tail = std::thread([&] {
      check(cudaSetDevice(ordinal), "cudaSetDevice");
      std::byte* at = out.data() + head_bytes;
      const auto begin = Clock::now();
      check(cudaHostRegister(at, tail_bytes, cudaHostRegisterPortable), "cudaHostRegister");
      const auto registered = Clock::now();
      check(cudaMemcpyAsync(at, source.ptr + head_bytes, tail_bytes, cudaMemcpyDeviceToHost, stream),
            "cudaMemcpyAsync");
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      const auto copied = Clock::now();
      check(cudaHostUnregister(at), "cudaHostUnregister");
      t.tail_register = micros(begin, registered);
      t.tail_copy = micros(registered, copied);
      t.tail_unregister = micros(copied, Clock::now());
    });
  }
  transfer.gather_into(out.first(head_bytes));
  t.head = micros(start, Clock::now());
  if (tail.joinable()) tail.join();
  t.total = micros(start, Clock::now());
  return t;
}

int run() {
  auto manager = gpuxfer::MultiGpuManager::create();
  gpuxfer::InterGpuTransfer transfer(manager);
  const int ordinal = manager->device(0).ordinal;
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  DeviceMemory source(total_bytes);
  // Page-aligned, so that the tail's registration takes none of the head's pages (the host threads
  // write those); total_bytes is a whole number of pages.
  const auto page_bytes = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::unique_ptr<std::byte, decltype(&std::free)> pages(
      static_cast<std::byte*>(std::aligned_alloc(page_bytes, total_bytes)), &std::free);
  if (!pages) {
    std::fprintf(stderr, "gpuxfer-probe-partial-registration: no memory for the destination\n");
    return 1;
  }
  const std::span<std::byte> out(pages.get(), total_bytes);
  std::vector<std::byte> expected(total_bytes);
  for (std::size_t i = 0; i < total_bytes; ++i)
    expected[i] = static_cast<std::byte>((i * 31 + i / 4093) & 0xff);  // differs per page and per byte
  check(cudaMemcpy(source.ptr, expected.data(), total_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  std::memset(out.data(), 0, out.size());  // every page faulted in before anything is timed

  for (const std::size_t bytes : {4 * mib, 16 * mib, 64 * mib, 256 * mib}) time_registration(out, bytes);

  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  bool right = true;
  for (const std::size_t divisor : {0, 64, 16, 4}) {
    const std::size_t tail_bytes = divisor == 0 ? 0 : total_bytes / divisor / page_bytes * page_bytes;
    transfer.set_device_buffer(0, source.ptr, total_bytes - tail_bytes);
    std::vector<SplitTimes> samples;
    for (int i = 0; i < 9; ++i) {
      std::memset(out.data(), 0, out.size());
      const SplitTimes t = split_gather(transfer, ordinal, source, out, tail_bytes, stream);
      right = right && std::memcmp(out.data(), expected.data(), total_bytes) == 0;
      if (i >= 2) samples.push_back(t);  // two warm-up samples
    }
    const auto med = [&](double SplitTimes::*field) {
      std::vector<double> v;
      for (const SplitTimes& t : samples) v.push_back(t.*field);
      return median(v);
    };
    const double total = med(&SplitTimes::total);
    std::printf(
        "tail %5.1f MiB registered per call: %7.1f us = %5.2f GB/s (head's gather_into %7.1f us; tail: "
        "register %7.1f, copy %7.1f, unregister %7.1f)\n",
        static_cast<double>(tail_bytes) / mib, total, total_bytes / total / 1e3, med(&SplitTimes::head),
        med(&SplitTimes::tail_register), med(&SplitTimes::tail_copy), med(&SplitTimes::tail_unregister));
  }
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  std::printf("# gpuxfer-probe-partial-registration: %s\n",
              right ? "OK: every byte right" : "FAILED: wrong bytes");
  return right ? 0 : 1;
}

}  // namespace

int main() { return gpuxfer::probe::main_of(run); }
