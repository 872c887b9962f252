// gpuxfer-probe-host-memory: how many bytes a second this host's memory moves, alone and while device 0's
// PCIe link runs, and how much the link keeps of its own speed meanwhile: the hardware's limit under the
// pageable paths, each of whose bytes crosses host memory three times (an upload: the copy's read of the
// caller's memory, its write of a staging slot, the link's read of that slot; a download the link's
// write, the copy's read and its write).
//
// Host loads on 8 and 16 threads (and on every core): reads (vector loads), writes (streaming stores) and
// copies (the library's streaming-store copy, two passes a byte), each thread over its own part of 512 MiB
// of pageable memory until told to stop. Each is measured alone, while the link copies 8 x 256 MiB pinned
// -> device (H2D), while it copies back (D2H), and while it reads one 8 MiB pinned block 256 times (H2D
// from a block the cache can hold). "memory" is the host's bytes times their passes plus the link's bytes.
// The host's rate is counted over the link's copies alone (steady_clock), the link's with events.
//
//   gpuxfer-probe-host-memory [rounds]     (median of that many rounds per row, default 3)
//
// Exit 0 when the loads' bytes came out right, 1 otherwise or on a failure, 2 without a GPU.
#include <cuda_runtime_api.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "memory/streaming_copy.hpp"
#include "probes/probe.hpp"

namespace {

using gpuxfer::probe::check;
using gpuxfer::probe::median;
using Clock = std::chrono::steady_clock;

constexpr std::size_t mib = std::size_t{1} << 20;
constexpr std::size_t host_bytes = 512 * mib;  // per side of a copy
constexpr std::size_t block = 1 * mib;         // what a host thread counts at a time
constexpr std::size_t dma_bytes = 256 * mib;
constexpr int dma_copies = 8;
constexpr std::size_t small_bytes = 8 * mib;
constexpr int small_copies = 256;

enum class Load { none, read, write, copy };
enum class Link { none, h2d, d2h, h2d_small };

const char* name(Load l) {
  switch (l) {
    case Load::none: return "none";
    case Load::read: return "read";
    case Load::write: return "write";
    case Load::copy: return "copy";
  }
  return "?";
}

const char* name(Link l) {
  switch (l) {
    case Link::none: return "alone";
    case Link::h2d: return "H2D";
    case Link::d2h: return "D2H";
    case Link::h2d_small: return "H2D 8M";
  }
  return "?";
}

int passes(Load l) { return l == Load::copy ? 2 : l == Load::none ? 0 : 1; }

__attribute__((target("avx2"))) std::uint64_t read_avx2(const std::byte* p, std::size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (std::size_t i = 0; i + 128 <= n; i += 128) {
    a = _mm256_xor_si256(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_xor_si256(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    c = _mm256_xor_si256(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    d = _mm256_xor_si256(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  return static_cast<std::uint64_t>(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 1) ^
                                    _mm256_extract_epi64(x, 2) ^ _mm256_extract_epi64(x, 3));
}

__attribute__((target("avx2"))) void write_avx2(std::byte* p, std::size_t n, std::uint8_t value) {
  const __m256i v = _mm256_set1_epi8(static_cast<char>(value));
  for (std::size_t i = 0; i + 32 <= n; i += 32) _mm256_stream_si256(reinterpret_cast<__m256i*>(p + i), v);
  _mm_sfence();
}

struct alignas(64) Counter {
  std::atomic<std::size_t> bytes{0};
};

struct Machine {
  std::byte* src = nullptr;  // pageable, page-aligned
  std::byte* dst = nullptr;
  std::byte* pinned = nullptr;
  std::byte* device = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, end = nullptr;
};

// One thread's load over its part [begin, begin + len) of the buffers, a block at a time, until @p stop.
void run_load(Machine& m, Load load, std::size_t begin, std::size_t len, Counter& count,
              const std::atomic<bool>& stop) {
  std::uint64_t x = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    for (std::size_t off = begin; off < begin + len && !stop.load(std::memory_order_relaxed); off += block) {
      const std::size_t n = std::min(block, begin + len - off);
      switch (load) {
        case Load::read: x ^= read_avx2(m.src + off, n); break;
        case Load::write: write_avx2(m.dst + off, n, 0x5a); break;
        case Load::copy: gpuxfer::detail::copy_streaming(m.dst + off, m.src + off, n); break;
        case Load::none: break;
      }
      count.bytes.fetch_add(n, std::memory_order_relaxed);
    }
  }
  if (x == 0x123456789abcdefULL) std::puts("");  // keeps the reads
}

struct Sample {
  double host = 0;  // GB/s of the load's own bytes
  double link = 0;  // GB/s
};

std::size_t counted(const std::vector<Counter>& counters) {
  std::size_t sum = 0;
  for (const Counter& c : counters) sum += c.bytes.load(std::memory_order_relaxed);
  return sum;
}

Sample measure(Machine& m, Load load, int threads, Link link) {
  std::atomic<bool> stop{false};
  std::vector<Counter> counters(static_cast<std::size_t>(threads));
  std::vector<std::jthread> workers;
  const std::size_t part = host_bytes / static_cast<std::size_t>(threads) / block * block;
  if (load != Load::none) {
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back(run_load, std::ref(m), load, static_cast<std::size_t>(t) * part, part,
                           std::ref(counters[static_cast<std::size_t>(t)]), std::cref(stop));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // every thread at work
  }
  const std::size_t before = counted(counters);
  const auto t0 = Clock::now();
  std::size_t moved = 0;
  if (link == Link::none) {
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  } else {
    check(cudaEventRecord(m.start, m.stream), "cudaEventRecord");
    const bool small = link == Link::h2d_small;
    for (int i = 0; i < (small ? small_copies : dma_copies); ++i) {
      const std::size_t n = small ? small_bytes : dma_bytes;
      check(link == Link::d2h ? cudaMemcpyAsync(m.pinned, m.device, n, cudaMemcpyDeviceToHost, m.stream)
                              : cudaMemcpyAsync(m.device, m.pinned, n, cudaMemcpyHostToDevice, m.stream),
            "cudaMemcpyAsync");
      moved += n;
    }
    check(cudaEventRecord(m.end, m.stream), "cudaEventRecord");
    check(cudaEventSynchronize(m.end), "cudaEventSynchronize");
  }
  const auto t1 = Clock::now();
  const std::size_t after = counted(counters);
  stop.store(true);
  workers.clear();
  Sample s;
  s.host = static_cast<double>(after - before) / std::chrono::duration<double>(t1 - t0).count() / 1e9;
  if (link != Link::none) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, m.start, m.end), "cudaEventElapsedTime");
    s.link = static_cast<double>(moved) / (static_cast<double>(ms) / 1e3) / 1e9;
  }
  return s;
}

struct Row {
  Load load;
  int threads;
  Link link;
  std::vector<double> host, link_rate;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  if (!__builtin_cpu_supports("avx2")) {
    std::fprintf(stderr, "gpuxfer-probe-host-memory: needs AVX2\n");
    return 1;
  }
  Machine m;
  if (const cudaError_t e = cudaSetDevice(0); e != cudaSuccess) {
    std::fprintf(stderr, "gpuxfer-probe-host-memory: no GPU: %s\n", cudaGetErrorString(e));
    return 2;
  }
  m.src = static_cast<std::byte*>(std::aligned_alloc(4096, host_bytes));
  m.dst = static_cast<std::byte*>(std::aligned_alloc(4096, host_bytes));
  if (m.src == nullptr || m.dst == nullptr) {
    std::fprintf(stderr, "gpuxfer-probe-host-memory: out of host memory\n");
    return 1;
  }
  for (std::size_t i = 0; i < host_bytes; ++i) m.src[i] = static_cast<std::byte>(i * 131 + (i >> 20));
  std::memset(m.dst, 0, host_bytes);
  check(cudaHostAlloc(reinterpret_cast<void**>(&m.pinned), dma_bytes, cudaHostAllocPortable), "cudaHostAlloc");
  std::memset(m.pinned, 7, dma_bytes);
  check(cudaMalloc(reinterpret_cast<void**>(&m.device), dma_bytes), "cudaMalloc");
  check(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreate(&m.start), "cudaEventCreate");
  check(cudaEventCreate(&m.end), "cudaEventCreate");

  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> thread_counts{8, 16};
  if (cores != 8 && cores != 16) thread_counts.push_back(cores);
  std::vector<Row> rows;
  for (const Link link : {Link::h2d, Link::d2h, Link::h2d_small}) rows.push_back({Load::none, 0, link, {}, {}});
  for (const Load load : {Load::read, Load::write, Load::copy}) {
    for (const int t : thread_counts) {
      for (const Link link : {Link::none, Link::h2d, Link::d2h, Link::h2d_small}) rows.push_back({load, t, link, {}, {}});
    }
  }
  for (int r = 0; r < rounds; ++r) {
    for (Row& row : rows) {
      const Sample s = measure(m, row.load, std::max(1, row.threads), row.link);
      row.host.push_back(s.host);
      row.link_rate.push_back(s.link);
    }
  }

  // The copy load's bytes: the last round's copies (after its writes) went over every block of the
  // destination, stopping only between blocks, so every block must equal its source.
  std::size_t wrong_blocks = 0;
  for (std::size_t p = 0; p + block <= host_bytes; p += block) wrong_blocks += std::memcmp(m.dst + p, m.src + p, block) != 0;
  const bool ok = wrong_blocks == 0;
  if (!ok) std::printf("the copy load left %zu of %zu blocks unlike their source\n", wrong_blocks, host_bytes / block);

  double h2d_alone = 0, d2h_alone = 0;
  std::printf("# gpuxfer-probe-host-memory: %d cores, %zu MiB pageable per side, link copies of %zu MiB (x%d) "
              "and %zu MiB (x%d) on device 0, median of %d rounds\n",
              cores, host_bytes / mib, dma_bytes / mib, dma_copies, small_bytes / mib, small_copies, rounds);
  std::printf("# load   threads  link    | host GB/s  link GB/s (x alone)  memory GB/s\n");
  for (const Row& row : rows) {
    const double host = row.load == Load::none ? 0 : median(row.host);
    const double link = row.link == Link::none ? 0 : median(row.link_rate);
    if (row.load == Load::none && row.link == Link::h2d) h2d_alone = link;
    if (row.load == Load::none && row.link == Link::d2h) d2h_alone = link;
    const double alone = row.link == Link::d2h ? d2h_alone : h2d_alone;  // H2D 8M against H2D alone
    const double memory = host * passes(row.load) + (row.link == Link::h2d_small ? 0 : link);
    std::string link_text = "-";
    if (row.link != Link::none) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%6.2f (%.3f)", link, link / alone);
      link_text = buf;
    }
    std::printf("%-6s %7d  %-7s | %9.2f  %-19s  %9.2f%s\n", name(row.load), row.threads, name(row.link), host,
                link_text.c_str(), memory, row.link == Link::h2d_small ? " (without the link's bytes: its block may be in the cache)" : "");
  }
  std::printf("# gpuxfer-probe-host-memory: %s\n", ok ? "OK: the copy load's bytes verified" : "FAILED");
  return ok ? 0 : 1;
}
