// gpuxfer-probe-batch-streams: how many copy-engine copies run at once. 64 MiB of blocks between device
// memory and pinned host memory in random order (4 KiB to 256 KiB blocks, each direction), as one
// cudaMemcpyBatchAsync on one stream and as the same rows split over 2, 4 and 8 streams (forked from the
// first by an event and joined back), the 8 streams fed in parts that grow as copy_blocks cuts them (a
// small first part starts the link sooner), beside one copy of all the bytes (the link), and
// copy_blocks_async of the same pairs (path automatic, then batch and kernel forced) with the path taken
// and the host time of its call. Beside them, the host time that queueing the 8-stream split takes raw,
// and a copy_blocks_async call of one pair (forced batch): the call's cost apart from its copies. Each
// form's time is the best of 7, by events on the first stream; the bytes of every form's last sample are
// checked. It is why copy_blocks splits a batch of long rows over side streams as it does and where the
// kernel takes over (docs/BLOCKS.md), and it tells the library's own cost from the copies' when
// gpuxfer-bench's blocks_* rows fall short.
//
//   gpuxfer-probe-batch-streams
//
// Exit 0 when the bytes were right, 1 otherwise or on a CUDA error, 2 without a GPU.
#include <gpuxfer/block_copy.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "ops/block_plan.hpp"
#include "probes/probe.hpp"

namespace {

using gpuxfer::probe::check;

constexpr std::size_t total = std::size_t{64} << 20;
constexpr int tries = 7;
constexpr int max_streams = 8;

struct Resources {
  std::byte* device = nullptr;
  std::byte* host = nullptr;
  cudaStream_t streams[max_streams] = {};
  cudaEvent_t joins[max_streams] = {};  // joins[0]: the fork
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
};

// Milliseconds of the best of `tries` runs of @p queue (which queues on the streams it is given), timed
// on streams[0] around a fork to and a join of the first @p k streams.
template <typename Queue>
float best_ms(const Resources& r, int k, const Queue& queue) {
  float best = 1e30F;
  for (int t = 0; t < tries; ++t) {
    check(cudaEventRecord(r.start, r.streams[0]), "cudaEventRecord");
    check(cudaEventRecord(r.joins[0], r.streams[0]), "cudaEventRecord");
    for (int j = 1; j < k; ++j) check(cudaStreamWaitEvent(r.streams[j], r.joins[0]), "cudaStreamWaitEvent");
    queue();
    for (int j = 1; j < k; ++j) {
      check(cudaEventRecord(r.joins[j], r.streams[j]), "cudaEventRecord");
      check(cudaStreamWaitEvent(r.streams[0], r.joins[j]), "cudaStreamWaitEvent");
    }
    check(cudaEventRecord(r.stop, r.streams[0]), "cudaEventRecord");
    check(cudaEventSynchronize(r.stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, r.start, r.stop), "cudaEventElapsedTime");
    best = std::min(best, ms);
  }
  return best;
}

// Fills the source with a pattern of @p salt and poisons the destination; checks after.
struct Data {
  const Resources& r;
  bool h2d;
  std::size_t block;
  const std::vector<std::size_t>& slot;  // host slot of device block i
  std::vector<std::byte> pattern;

  void prepare(unsigned salt) {
    pattern.resize(total);
    for (std::size_t i = 0; i < total; ++i) pattern[i] = static_cast<std::byte>((i * 13 + salt) >> 3);
    if (h2d) {
      std::memcpy(r.host, pattern.data(), total);
      check(cudaMemset(r.device, 0xA5, total), "cudaMemset");
    } else {
      check(cudaMemcpy(r.device, pattern.data(), total, cudaMemcpyHostToDevice), "fill the device");
      std::memset(r.host, 0xA5, total);
    }
  }
  // Every block where the pairs put it: device block i <-> host slot slot[i].
  [[nodiscard]] bool right() const {
    std::vector<std::byte> dev(total);
    check(cudaMemcpy(dev.data(), r.device, total, cudaMemcpyDeviceToHost), "read the device");
    for (std::size_t i = 0; i < slot.size(); ++i) {
      const std::byte* want = h2d ? pattern.data() + slot[i] * block : pattern.data() + i * block;
      const std::byte* got = h2d ? dev.data() + i * block : r.host + slot[i] * block;
      if (std::memcmp(want, got, block) != 0) return false;
    }
    return true;
  }
};

bool measure(const Resources& r, std::size_t block, bool h2d) {
  const std::size_t n = total / block;
  std::vector<std::size_t> slot(n);
  std::iota(slot.begin(), slot.end(), 0);
  std::shuffle(slot.begin(), slot.end(), std::mt19937_64(42 + block));
  std::vector<void*> dsts(n);
  std::vector<const void*> srcs(n);
  const std::vector<std::size_t> sizes(n, block);
  for (std::size_t i = 0; i < n; ++i) {
    std::byte* host = r.host + slot[i] * block;
    std::byte* dev = r.device + i * block;
    dsts[i] = h2d ? static_cast<void*>(dev) : static_cast<void*>(host);
    srcs[i] = h2d ? static_cast<const void*>(host) : static_cast<const void*>(dev);
  }
  Data data{r, h2d, block, slot, {}};
  const float link = best_ms(r, 1, [&] {
    check(cudaMemcpyAsync(h2d ? static_cast<void*>(r.device) : static_cast<void*>(r.host),
                          h2d ? static_cast<const void*>(r.host) : static_cast<const void*>(r.device), total,
                          cudaMemcpyDefault, r.streams[0]),
          "cudaMemcpyAsync");
  });
  std::printf("%s %4zu KiB x %5zu: link %6.2f GB/s; one batch over k streams, fraction of the link:",
              h2d ? "H2D" : "D2H", block >> 10, n, static_cast<double>(total) / (link * 1e6));
  bool right = true;
  unsigned salt = static_cast<unsigned>(block >> 10) + (h2d ? 1000U : 0U);
  // Rows [cuts[j], cuts[j + 1]) as one cudaMemcpyBatchAsync on stream j.
  const auto queue_parts = [&](const std::vector<std::size_t>& cuts) {
    for (std::size_t j = 0; j + 1 < cuts.size(); ++j) {
      cudaMemcpyAttributes attrs{};
      attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      std::size_t attrs_index = 0;
      const std::size_t lo = cuts[j];
      const std::size_t hi = cuts[j + 1];
      check(cudaMemcpyBatchAsync(dsts.data() + lo, srcs.data() + lo, sizes.data() + lo, hi - lo, &attrs,
                                 &attrs_index, 1, r.streams[j]),
            "cudaMemcpyBatchAsync");
    }
  };
  for (const int k : {1, 2, 4, 8}) {
    std::vector<std::size_t> cuts;  // k equal parts
    for (int j = 0; j <= k; ++j) cuts.push_back(n * static_cast<std::size_t>(j) / static_cast<std::size_t>(k));
    data.prepare(++salt);
    double queue_us = 1e30;
    const float ms = best_ms(r, k, [&] {
      const auto t0 = std::chrono::steady_clock::now();
      queue_parts(cuts);
      const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - t0;
      queue_us = std::min(queue_us, took.count());
    });
    const bool ok = data.right();
    right = right && ok;
    std::printf("  k%d %.3f%s", k, link / ms, ok ? "" : " (WRONG BYTES)");
    if (k == max_streams) std::printf(" (queued in %.1f us)", queue_us);
  }
  {  // The 8 streams fed as copy_blocks feeds them (detail::batch_cut: small first parts start the link
     // sooner).
    std::vector<std::size_t> cuts;
    for (std::size_t j = 0; j <= max_streams; ++j)
      cuts.push_back(gpuxfer::detail::batch_cut(n, max_streams, j));
    data.prepare(++salt);
    const float ms = best_ms(r, max_streams, [&] { queue_parts(cuts); });
    const bool ok = data.right();
    right = right && ok;
    std::printf("  ramp %.3f%s", link / ms, ok ? "" : " (WRONG BYTES)");
  }
  // The library on the same pairs: host slot slot[i] <-> device block i.
  std::vector<std::int64_t> pairs;
  pairs.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto host = static_cast<std::int64_t>(slot[i]);
    const auto dev = static_cast<std::int64_t>(i);
    pairs.insert(pairs.end(), {h2d ? host : dev, h2d ? dev : host});
  }
  const gpuxfer::BlockLayout host_side{r.host, n};
  const gpuxfer::BlockLayout device_side{r.device, n};
  gpuxfer::BlockCopy copy{h2d ? host_side : device_side, h2d ? device_side : host_side, pairs.data(), n,
                          block};
  for (const gpuxfer::BlockPath path :
       {gpuxfer::BlockPath::automatic, gpuxfer::BlockPath::batch, gpuxfer::BlockPath::kernel}) {
    copy.path = path;
    double call_us = 1e30;
    gpuxfer::BlockPath took_path = path;
    data.prepare(++salt);
    const float lib = best_ms(r, 1, [&] {
      const auto t0 = std::chrono::steady_clock::now();
      took_path = gpuxfer::copy_blocks_async(copy, r.streams[0]);
      const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - t0;
      call_us = std::min(call_us, took.count());
    });
    const bool ok = data.right();
    right = right && ok;
    std::printf("  copy_blocks_async %s %.3f%s (%s, call %.1f us)", gpuxfer::to_string(path), link / lib,
                ok ? "" : " (WRONG BYTES)", gpuxfer::to_string(took_path), call_us);
  }
  // The call's cost apart from its copies: one pair, forced batch (one cudaMemcpyBatchAsync of one copy).
  copy.count = 1;
  copy.path = gpuxfer::BlockPath::batch;
  double one_us = 1e30;
  for (int t = 0; t < tries; ++t) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)gpuxfer::copy_blocks_async(copy, r.streams[0]);
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - t0;
    one_us = std::min(one_us, took.count());
    check(cudaStreamSynchronize(r.streams[0]), "cudaStreamSynchronize");
  }
  const bool ok = data.right();  // the pair copies a block that is already right
  right = right && ok;
  std::printf("  one pair %.1f us%s", one_us, ok ? "" : " (WRONG BYTES)");
  std::printf("\n");
  return right;
}

int run() {
  if (!gpuxfer::probe::has_device()) return 2;
  check(cudaSetDevice(0), "cudaSetDevice");
  Resources r;
  check(cudaMalloc(reinterpret_cast<void**>(&r.device), total), "cudaMalloc");
  check(cudaHostAlloc(reinterpret_cast<void**>(&r.host), total, cudaHostAllocPortable), "cudaHostAlloc");
  for (int j = 0; j < max_streams; ++j) {
    check(cudaStreamCreateWithFlags(&r.streams[j], cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cudaEventCreateWithFlags(&r.joins[j], cudaEventDisableTiming), "cudaEventCreateWithFlags");
  }
  check(cudaEventCreate(&r.start), "cudaEventCreate");
  check(cudaEventCreate(&r.stop), "cudaEventCreate");
  bool right = true;
  for (const std::size_t block : {std::size_t{4} << 10, std::size_t{16} << 10, std::size_t{32} << 10,
                                  std::size_t{64} << 10, std::size_t{256} << 10}) {
    for (const bool h2d : {false, true}) right = measure(r, block, h2d) && right;
  }
  for (int j = 0; j < max_streams; ++j) {
    check(cudaEventDestroy(r.joins[j]), "cudaEventDestroy");
    check(cudaStreamDestroy(r.streams[j]), "cudaStreamDestroy");
  }
  check(cudaEventDestroy(r.start), "cudaEventDestroy");
  check(cudaEventDestroy(r.stop), "cudaEventDestroy");
  check(cudaFreeHost(r.host), "cudaFreeHost");
  check(cudaFree(r.device), "cudaFree");
  std::printf("# gpuxfer-probe-batch-streams: %s\n", right ? "OK: every byte right" : "FAILED: wrong bytes");
  return right ? 0 : 1;
}

}  // namespace

int main() { return gpuxfer::probe::main_of(run); }
