// gpuxfer-probe-small-calls: the library's small calls timed alone, many in a row, in one process, to set
// beside gpuxfer-bench's rows (one call per sample, after that sample's preparation and before its check):
// gather_slices of 1000 x 4 KiB pieces of device 0 into pinned memory (back to back, after a memset of the
// pieces and a device sync, after a CPU memset of the output, after streaming stores over it, after a
// pause), one cudaMemcpyAsync per piece, and a 4 KiB gather_all (back to back, after a fill and a
// re-registration, after a pause) against the raw copy + event wait, and the raw copy's timeline (queueing,
// the copy on the GPU, until the host sees it) back to back and after a pause: where a slow mode's time
// goes. Medians, min and max in microseconds; the gathered bytes are checked.
//
//   gpuxfer-probe-small-calls [pause_ms]    (the pause of the "after a pause" case, default 5)
//
// Exit 0 when the bytes were right, 1 otherwise, 2 without a GPU.
#include <gpuxfer/gpuxfer.hpp>

#include <cuda_runtime_api.h>
#include <emmintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "probes/probe.hpp"

namespace {

using gpuxfer::probe::check;
using gpuxfer::probe::median;

// @p calls runs of @p call, each after @p before (untimed); prints the median, min and max.
void report(const char* what, int calls, const std::function<void()>& before, const std::function<void()>& call) {
  std::vector<double> us;
  for (int i = 0; i < calls; ++i) {
    before();
    const auto start = std::chrono::steady_clock::now();
    call();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::printf("%-58s median %8.1f us  (min %.1f, max %.1f, %d calls)\n", what, median(us),
              *std::min_element(us.begin(), us.end()), *std::max_element(us.begin(), us.end()), calls);
}

// Where the time of one raw 4 KiB D2H + event wait goes, back to back (@p pause_ms 0) or after a pause:
// queueing (host clock around the two records and the copy), the copy on the GPU (timing events around
// it), and the rest until the host sees the event (launch latency and wake-up). Medians of 200 calls.
void timeline(char* pinned, const char* device, std::size_t bytes, cudaStream_t stream, int pause_ms) {
  cudaEvent_t before = nullptr, after = nullptr;
  check(cudaEventCreate(&before), "cudaEventCreate");
  check(cudaEventCreate(&after), "cudaEventCreate");
  std::vector<double> queue_us, copy_us, total_us;
  for (int i = 0; i < 200; ++i) {
    if (pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    const auto start = std::chrono::steady_clock::now();
    check(cudaEventRecord(before, stream), "cudaEventRecord");
    check(cudaMemcpyAsync(pinned, device, bytes, cudaMemcpyDeviceToHost, stream), "D2H");
    check(cudaEventRecord(after, stream), "cudaEventRecord");
    const auto queued = std::chrono::steady_clock::now();
    check(cudaEventSynchronize(after), "cudaEventSynchronize");
    const auto seen = std::chrono::steady_clock::now();
    float ms = 0;
    check(cudaEventElapsedTime(&ms, before, after), "cudaEventElapsedTime");
    queue_us.push_back(std::chrono::duration<double, std::micro>(queued - start).count());
    copy_us.push_back(static_cast<double>(ms) * 1e3);
    total_us.push_back(std::chrono::duration<double, std::micro>(seen - start).count());
  }
  std::printf("4 KiB raw copy timeline, %s: queueing %.2f us, copy on the GPU %.2f us, until seen %.2f us\n",
              pause_ms > 0 ? "after a pause" : "back to back", median(queue_us), median(copy_us), median(total_us));
  check(cudaEventDestroy(before), "cudaEventDestroy");
  check(cudaEventDestroy(after), "cudaEventDestroy");
}

int run(int pause_ms) {
  constexpr std::size_t count = 1000, piece = 4096, stride = 8192;  // as gpuxfer-bench's small_gather
  auto manager = gpuxfer::MultiGpuManager::create();
  gpuxfer::InterGpuTransfer transfer(manager);
  const int ordinal = manager->device(0).ordinal;
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  char* arena = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&arena), count * stride), "cudaMalloc");
  check(cudaMemset(arena, 0x11, count * stride), "cudaMemset");
  char* out = nullptr;
  check(cudaHostAlloc(reinterpret_cast<void**>(&out), count * piece, cudaHostAllocPortable), "cudaHostAlloc");
  std::vector<gpuxfer::DeviceSlice> slices;
  for (std::size_t k = 0; k < count; ++k) slices.push_back({0, arena + k * stride, piece});
  const std::span<std::byte> into(reinterpret_cast<std::byte*>(out), count * piece);
  const auto gather_slices = [&] { (void)transfer.gather_slices(slices, into); };
  const auto nothing = [] {};
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  for (int i = 0; i < 20; ++i) gather_slices();

  report("gather_slices, back to back", 300, nothing, gather_slices);
  report("gather_slices, after a memset of the pieces + device sync", 30, [&] {
    check(cudaMemset(arena, 0x11, count * stride), "cudaMemset");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }, gather_slices);
  report("gather_slices, after a CPU memset of the output", 60, [&] { std::memset(out, 0xA5, count * piece); },
         gather_slices);
  report("gather_slices, after streaming stores over the output", 60, [&] {
    const __m128i poison = _mm_set1_epi8(static_cast<char>(0xA5));
    for (std::size_t o = 0; o < count * piece; o += 16) _mm_stream_si128(reinterpret_cast<__m128i*>(out + o), poison);
    _mm_sfence();
  }, gather_slices);
  std::printf("# the pause below: %d ms of sleep before each call\n", pause_ms);
  report("gather_slices, after a pause", 30, [&] { std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms)); },
         gather_slices);
  const std::size_t wrong = static_cast<std::size_t>(count * piece - std::count(out, out + count * piece, 0x11));

  cudaStream_t raw = nullptr;
  check(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  report("one cudaMemcpyAsync per piece, then a stream sync", 20, nothing, [&] {
    for (std::size_t k = 0; k < count; ++k) {
      check(cudaMemcpyAsync(out + k * piece, arena + k * stride, piece, cudaMemcpyDeviceToHost, raw), "D2H");
    }
    check(cudaStreamSynchronize(raw), "cudaStreamSynchronize");
  });

  char* small = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&small), piece), "cudaMalloc");
  cudaStream_t own = nullptr;
  check(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  gpuxfer::InterGpuTransfer one(manager);
  one.set_device_buffer(0, small, piece, own);
  for (int i = 0; i < 300; ++i) (void)one.gather_all();
  report("4 KiB gather_all, back to back", 3000, nothing, [&] { (void)one.gather_all(); });
  report("4 KiB gather_all, after a fill + set_device_buffer", 50, [&] {
    check(cudaMemsetAsync(small, 0x22, piece, own), "cudaMemsetAsync");
    check(cudaStreamSynchronize(own), "cudaStreamSynchronize");
    one.set_device_buffer(0, small, piece, own);
  }, [&] { (void)one.gather_all(); });
  char* pinned = nullptr;
  check(cudaHostAlloc(reinterpret_cast<void**>(&pinned), piece, cudaHostAllocPortable), "cudaHostAlloc");
  cudaEvent_t done = nullptr;
  check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  report("4 KiB raw cudaMemcpyAsync + event wait, back to back", 3000, nothing, [&] {
    check(cudaMemcpyAsync(pinned, small, piece, cudaMemcpyDeviceToHost, raw), "D2H");
    check(cudaEventRecord(done, raw), "cudaEventRecord");
    check(cudaEventSynchronize(done), "cudaEventSynchronize");
  });
  timeline(pinned, small, piece, raw, 0);
  timeline(pinned, small, piece, raw, pause_ms);
  report("4 KiB gather_all, after a pause", 30, [&] { std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms)); },
         [&] { (void)one.gather_all(); });
  const std::vector<gpuxfer::HostBuffer> last = one.gather_all();
  const bool small_right = last.size() == 1 && last[0].size() == piece &&
                           std::all_of(last[0].data(), last[0].data() + piece, [](std::byte b) { return b == std::byte{0x22}; });
  std::printf("# gpuxfer-probe-small-calls: %s: gather_slices %zu bytes wrong, gather_all %s\n",
              wrong == 0 && small_right ? "OK" : "FAILED", wrong, small_right ? "right" : "WRONG");
  return wrong == 0 && small_right ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return gpuxfer::probe::main_of([&] { return run(argc > 1 ? std::max(0, std::atoi(argv[1])) : 5); });
}
