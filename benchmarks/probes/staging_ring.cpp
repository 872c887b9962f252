// gpuxfer-probe-staging: what a pageable transfer through a ring of pinned slots can reach on this host,
// without the library: 256 MiB device -> slots -> pageable memory (D2H, host threads copy out) and the
// reverse (host threads copy in, H2D), over chunk sizes, copy threads, how a landed chunk is signalled
// (cuStreamWriteValue32 or an event), who queues the GPU's copies (a thread that also copies, one that only
// queues, or the GPU itself waiting on host flags), how many streams, and the copy's stores (libc or the
// library's streaming stores, AVX-512 where the CPU has it); beside the pinned DMA ceilings, the host copy bounds (8 and 16 threads) and what
// page-locking the caller's memory on the fly costs (cudaHostRegister from 1, 2 and 4 threads).
// docs/PERFORMANCE.md's "pageable paths through the staging ring" chose the library's ring from it.
//
//   gpuxfer-probe-staging [rounds]     (median of that many rounds per row, default 3)
//
// Every queueing mode's bytes are checked once before the table. Exit 0, 1 on wrong bytes or a failure,
// 2 without a GPU.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "memory/streaming_copy.hpp"
#include "probes/probe.hpp"

namespace {

using gpuxfer::probe::check;
using gpuxfer::probe::median;

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  std::fprintf(stderr, "gpuxfer-probe-staging: %s: CUresult %d\n", what, static_cast<int>(r));
  std::exit(1);
}

using Clock = std::chrono::steady_clock;
constexpr std::size_t kBytes = std::size_t{256} << 20;
constexpr std::size_t kRingBytes = std::size_t{64} << 20;
constexpr std::size_t kMaxSlots = 64;

enum class Store { libc, streaming };
enum class Queue { also_copies, only_queues, gpu_waits };  // the thread that queues the GPU's copies
enum class Signal { write_value, event };

struct Config {
  std::size_t chunk, slots;
  int threads;  // copy threads besides a thread that only queues
  Queue queue;
  Signal signal;
  int streams;
};

// The library's own host copy kernels (memory/streaming_copy): libc, or the widest streaming stores here.
void copy(Store store, char* d, const char* s, std::size_t n) {
  using gpuxfer::detail::CopyKernel;
  const CopyKernel kernel = store == Store::libc ? CopyKernel::libc : gpuxfer::detail::copy_kernel();
  gpuxfer::detail::copy_with(kernel, d, s, n);
}

void relax(int& spins) {
  if (++spins < 2000) {
    _mm_pause();
  } else {
    sched_yield();
  }
}

// fn(t) on @p threads threads, t = 0 on the calling thread.
template <class Fn>
void parallel(int threads, Fn fn) {
  std::vector<std::jthread> others;
  for (int t = 1; t < threads; ++t) others.emplace_back(fn, t);
  fn(0);
}

double gbps(std::size_t bytes, Clock::time_point start) {
  return static_cast<double>(bytes) / std::chrono::duration<double>(Clock::now() - start).count() / 1e9;
}

struct Machine {
  PFN_cuStreamWriteValue32_v11070 write_value = nullptr;
  PFN_cuStreamWaitValue32_v11070 wait_value = nullptr;
  char* device = nullptr;
  char* pinned = nullptr;
  char* ring = nullptr;
  std::uint32_t* flags = nullptr;  // [0, kMaxSlots): landed / consumed, [256, ...): freed (gpu_waits)
  std::vector<char> source = std::vector<char>(kBytes, 2);
  std::vector<char> sink = std::vector<char>(kBytes, 1);
  cudaStream_t streams[2] = {};
  cudaEvent_t events[kMaxSlots] = {};
};

template <class Pfn>
Pfn entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  check(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &status), name);
  return reinterpret_cast<Pfn>(fn);
}

// Device -> ring -> m.sink through c.threads copy threads.
double download(Machine& m, const Config& c, Store store) {
  const std::size_t n = (kBytes + c.chunk - 1) / c.chunk;
  volatile std::uint32_t* landed = m.flags;
  volatile std::uint32_t* freed_gpu = m.flags + 256;
  std::vector<std::atomic<std::size_t>> freed(c.slots);
  for (std::size_t s = 0; s < c.slots; ++s) {
    landed[s] = 0;
    freed_gpu[s] = 0;
  }
  std::atomic<std::size_t> next{0};
  const auto queue_one = [&](std::size_t k) {
    cudaStream_t st = m.streams[k % static_cast<std::size_t>(c.streams)];
    const std::size_t slot = k % c.slots, offset = k * c.chunk, len = std::min(c.chunk, kBytes - offset);
    if (c.queue == Queue::gpu_waits && k >= c.slots) {
      check(m.wait_value(st, reinterpret_cast<CUdeviceptr>(freed_gpu + slot), static_cast<std::uint32_t>(k - c.slots + 1),
                         CU_STREAM_WAIT_VALUE_GEQ),
            "cuStreamWaitValue32");
    }
    check(cudaMemcpyAsync(m.ring + slot * c.chunk, m.device + offset, len, cudaMemcpyDeviceToHost, st), "D2H");
    if (c.signal == Signal::event) {
      check(cudaEventRecord(m.events[slot], st), "cudaEventRecord");
      std::atomic_thread_fence(std::memory_order_release);
      landed[slot] = static_cast<std::uint32_t>(k + 1);  // recorded: the copier waits for the event next
    } else {
      check(m.write_value(st, reinterpret_cast<CUdeviceptr>(landed + slot), static_cast<std::uint32_t>(k + 1), 0),
            "cuStreamWriteValue32");
    }
  };
  const auto start = Clock::now();
  parallel(c.queue == Queue::also_copies ? c.threads : c.threads + 1, [&](int t) {
    std::size_t queued = 0;
    if (t == 0 && c.queue == Queue::gpu_waits) {
      for (; queued < n; ++queued) queue_one(queued);
    }
    for (;;) {
      if (t == 0 && c.queue != Queue::gpu_waits) {
        while (queued < n && (queued < c.slots || freed[queued % c.slots].load() == queued - c.slots + 1)) {
          queue_one(queued++);
        }
        if (c.queue == Queue::only_queues) {
          if (queued == n) return;
          _mm_pause();
          continue;
        }
      }
      std::size_t k = next.load();
      if (k >= n) {
        if (t == 0 && queued < n) continue;
        return;
      }
      if (t == 0 && k >= queued) continue;  // never wait for what only this thread queues
      if (!next.compare_exchange_weak(k, k + 1)) continue;
      const std::size_t slot = k % c.slots, offset = k * c.chunk;
      int spins = 0;
      while (landed[slot] != static_cast<std::uint32_t>(k + 1)) relax(spins);
      if (c.signal == Signal::event) {
        while (cudaEventQuery(m.events[slot]) == cudaErrorNotReady) relax(spins);
      }
      copy(store, m.sink.data() + offset, m.ring + slot * c.chunk, std::min(c.chunk, kBytes - offset));
      freed_gpu[slot] = static_cast<std::uint32_t>(k + 1);
      freed[slot].store(k + 1);
    }
  });
  for (cudaStream_t st : m.streams) check(cudaStreamSynchronize(st), "D2H streams");
  return gbps(kBytes, start);
}

// m.source -> ring (c.threads copy threads) -> device; the queueing thread uploads in order.
double upload(Machine& m, const Config& c, Store store) {
  const std::size_t n = (kBytes + c.chunk - 1) / c.chunk;
  volatile std::uint32_t* consumed = m.flags;
  std::vector<std::atomic<std::size_t>> filled(c.slots);
  for (std::size_t s = 0; s < c.slots; ++s) consumed[s] = 0;
  std::atomic<std::size_t> next{0};
  const auto start = Clock::now();
  parallel(c.queue == Queue::also_copies ? c.threads : c.threads + 1, [&](int t) {
    std::size_t queued = 0;
    for (;;) {
      if (t == 0) {
        while (queued < n && filled[queued % c.slots].load() == queued + 1) {
          const std::size_t slot = queued % c.slots, offset = queued * c.chunk;
          check(cudaMemcpyAsync(m.device + offset, m.ring + slot * c.chunk, std::min(c.chunk, kBytes - offset),
                                cudaMemcpyHostToDevice, m.streams[0]),
                "H2D");
          check(m.write_value(m.streams[0], reinterpret_cast<CUdeviceptr>(consumed + slot),
                              static_cast<std::uint32_t>(queued + 1), 0),
                "cuStreamWriteValue32");
          ++queued;
        }
        if (queued == n) return;
        if (c.queue != Queue::also_copies) {
          _mm_pause();
          continue;
        }
      }
      std::size_t k = next.load();
      if (k >= n) {
        if (t == 0) continue;
        return;
      }
      const std::size_t slot = k % c.slots;
      const auto slot_free = [&] { return k < c.slots || consumed[slot] == static_cast<std::uint32_t>(k - c.slots + 1); };
      if (t == 0 && !slot_free()) continue;  // this thread must stay free to queue
      if (!next.compare_exchange_weak(k, k + 1)) continue;
      int spins = 0;
      while (!slot_free()) relax(spins);
      const std::size_t offset = k * c.chunk;
      copy(store, m.ring + slot * c.chunk, m.source.data() + offset, std::min(c.chunk, kBytes - offset));
      filled[slot].store(k + 1);
    }
  });
  check(cudaStreamSynchronize(m.streams[0]), "H2D stream");
  return gbps(kBytes, start);
}

double dma(Machine& m, cudaMemcpyKind kind) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  check(cudaEventRecord(a, m.streams[0]), "cudaEventRecord");
  check(kind == cudaMemcpyDeviceToHost ? cudaMemcpyAsync(m.pinned, m.device, kBytes, kind, m.streams[0])
                                       : cudaMemcpyAsync(m.device, m.pinned, kBytes, kind, m.streams[0]),
        "ceiling copy");
  check(cudaEventRecord(b, m.streams[0]), "cudaEventRecord");
  check(cudaEventSynchronize(b), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  check(cudaEventDestroy(a), "cudaEventDestroy");
  check(cudaEventDestroy(b), "cudaEventDestroy");
  return static_cast<double>(kBytes) / (ms / 1e3) / 1e9;
}

double host_bound(Machine& m, int threads, Store store) {
  const std::size_t part = (kBytes / static_cast<std::size_t>(threads) + 4095) / 4096 * 4096;
  const auto start = Clock::now();
  parallel(threads, [&](int t) {
    const std::size_t begin = std::min(kBytes, static_cast<std::size_t>(t) * part);
    copy(store, m.pinned + begin, m.source.data() + begin, std::min(kBytes, begin + part) - begin);
  });
  return gbps(kBytes, start);
}

const char* name(Queue q) {
  return q == Queue::also_copies ? "also copies" : q == Queue::only_queues ? "only queues" : "gpu waits  ";
}

// Every queueing mode and signal once, each byte of the result checked.
bool verify(Machine& m) {
  check(cudaMemset(m.device, 0x5a, kBytes), "cudaMemset");
  for (const Queue q : {Queue::also_copies, Queue::only_queues, Queue::gpu_waits}) {
    for (const Signal s : {Signal::write_value, Signal::event}) {
      if (q == Queue::gpu_waits && s == Signal::event) continue;
      std::fill(m.sink.begin(), m.sink.end(), 0);
      download(m, {std::size_t{1} << 20, 16, 8, q, s, 2}, Store::streaming);
      if (std::count(m.sink.begin(), m.sink.end(), 0x5a) != static_cast<std::ptrdiff_t>(kBytes)) {
        std::printf("download (%s) delivered wrong bytes\n", name(q));
        return false;
      }
    }
  }
  std::fill(m.source.begin(), m.source.end(), 0x33);
  upload(m, {std::size_t{1} << 20, 16, 8, Queue::only_queues, Signal::write_value, 1}, Store::libc);
  check(cudaMemcpy(m.pinned, m.device, kBytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  if (std::count(m.pinned, m.pinned + kBytes, 0x33) != static_cast<std::ptrdiff_t>(kBytes)) {
    std::printf("upload delivered wrong bytes\n");
    return false;
  }
  return true;
}

void register_on_the_fly(Machine& m) {
  for (const int threads : {1, 2, 4}) {
    for (const std::size_t piece : {std::size_t{4} << 20, std::size_t{32} << 20}) {
      const std::size_t pieces = kBytes / piece;
      std::atomic<std::size_t> next{0};
      const auto start = Clock::now();
      parallel(threads, [&](int) {
        for (std::size_t p; (p = next++) < pieces;) check(cudaHostRegister(m.sink.data() + p * piece, piece, 0), "register");
      });
      const double reg = gbps(kBytes, start);
      next = 0;
      const auto unreg_start = Clock::now();
      parallel(threads, [&](int) {
        for (std::size_t p; (p = next++) < pieces;) check(cudaHostUnregister(m.sink.data() + p * piece), "unregister");
      });
      std::printf("cudaHostRegister, %d threads, %3zu MiB pieces: %.1f GB/s; unregister %.2f ms\n", threads,
                  piece >> 20, reg,
                  std::chrono::duration<double, std::milli>(Clock::now() - unreg_start).count());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  Machine m;
  if (const cudaError_t e = cudaSetDevice(0); e != cudaSuccess) {
    std::fprintf(stderr, "gpuxfer-probe-staging: no GPU: %s\n", cudaGetErrorString(e));
    return 2;
  }
  m.write_value = entry<PFN_cuStreamWriteValue32_v11070>("cuStreamWriteValue32");
  m.wait_value = entry<PFN_cuStreamWaitValue32_v11070>("cuStreamWaitValue32");
  check(cudaMalloc(reinterpret_cast<void**>(&m.device), kBytes), "cudaMalloc");
  check(cudaHostAlloc(reinterpret_cast<void**>(&m.pinned), kBytes, cudaHostAllocPortable), "cudaHostAlloc");
  check(cudaHostAlloc(reinterpret_cast<void**>(&m.ring), kRingBytes, cudaHostAllocPortable), "cudaHostAlloc");
  check(cudaHostAlloc(reinterpret_cast<void**>(&m.flags), 4096, cudaHostAllocPortable | cudaHostAllocMapped),
        "cudaHostAlloc");
  for (cudaStream_t& s : m.streams) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  for (cudaEvent_t& e : m.events) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
  if (!verify(m)) return 1;

  std::vector<Config> configs;
  for (const std::size_t chunk : {std::size_t{256} << 10, std::size_t{512} << 10, std::size_t{1} << 20,
                                  std::size_t{2} << 20, std::size_t{4} << 20}) {
    for (const int threads : {8, 12, 15}) {
      const std::size_t slots = std::min({kRingBytes / chunk, 2 * static_cast<std::size_t>(threads), kMaxSlots});
      for (const Queue q : {Queue::also_copies, Queue::only_queues, Queue::gpu_waits}) {
        configs.push_back({chunk, slots, threads, q, Signal::write_value, 1});
      }
      configs.push_back({chunk, slots, threads, Queue::only_queues, Signal::event, 1});
      configs.push_back({chunk, slots, threads, Queue::only_queues, Signal::write_value, 2});
    }
  }
  std::vector<std::vector<double>> down(configs.size()), up_libc(configs.size()), up_streaming(configs.size());
  std::vector<double> d2h, h2d, t8, t16;
  for (int r = 0; r < rounds; ++r) {
    d2h.push_back(dma(m, cudaMemcpyDeviceToHost));
    h2d.push_back(dma(m, cudaMemcpyHostToDevice));
    t8.push_back(host_bound(m, 8, Store::streaming));
    t16.push_back(host_bound(m, 16, Store::streaming));
    for (std::size_t i = 0; i < configs.size(); ++i) {
      down[i].push_back(download(m, configs[i], Store::streaming));
      if (configs[i].streams == 1 && configs[i].queue != Queue::gpu_waits && configs[i].signal == Signal::write_value) {
        up_libc[i].push_back(upload(m, configs[i], Store::libc));
        up_streaming[i].push_back(upload(m, configs[i], Store::streaming));
      }
    }
  }
  const double down_ceiling = median(d2h), up_ceiling = median(h2d);
  std::printf("# D2H %.2f GB/s, H2D %.2f GB/s; host copy with streaming stores, 8 / 16 threads: %.2f / %.2f GB/s\n",
              down_ceiling, up_ceiling, median(t8), median(t16));
  std::printf("# chunk  slots thr queue       signal  streams | download (x D2H) | upload libc, streaming (x H2D)\n");
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const Config& c = configs[i];
    std::string up = "-";
    if (!up_libc[i].empty()) {
      up = std::to_string(median(up_libc[i]) / up_ceiling).substr(0, 5) + ", " +
           std::to_string(median(up_streaming[i]) / up_ceiling).substr(0, 5);
    }
    std::printf("%5zuK %5zu %3d %s %-7s %d       | %6.2f (%.3f)   | %s\n", c.chunk >> 10, c.slots, c.threads, name(c.queue),
                c.signal == Signal::event ? "event" : "value", c.streams, median(down[i]), median(down[i]) / down_ceiling,
                up.c_str());
  }
  register_on_the_fly(m);
  std::printf("# gpuxfer-probe-staging: OK: every queueing mode's bytes verified\n");
  return 0;
}
