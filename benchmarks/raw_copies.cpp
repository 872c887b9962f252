#include "raw_copies.hpp"

#include "cuda/copy_kernels.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace gpuxfer::bench {

void prepare_copies(Bench& b, const std::vector<RawCopy>& copies, std::uint64_t run) {
  for (const RawCopy& c : copies) {
    const std::uint64_t seed = Bench::seed(run, c.pattern);
    if (c.from.device) {
      b.fill_device(*c.from.device, c.from.ptr, c.bytes, seed);
    } else {
      parallel_fill(b.threads(), {c.from.ptr, c.bytes}, seed);
    }
    if (c.to.device) {
      b.poison_device(*c.to.device, c.to.ptr, c.bytes);
    } else {
      parallel_poison(b.threads(), {c.to.ptr, c.bytes});
    }
  }
  b.synchronize();
}

bool kernel_copy(const RawCopy& c) {
  return c.from.device && !c.to.device && c.bytes % 16 == 0 &&
         detail::copy_moves_vectors(c.to.ptr, c.from.ptr);
}

void enqueue_copies(Bench& b, const std::vector<RawCopy>& copies, bool record_done, bool kernels) {
  std::optional<DeviceGuard> guard;
  for (std::size_t i = 0; i < copies.size(); ++i) {
    const RawCopy& c = copies[i];
    if (i == 0 || copies[i - 1].stream != c.stream) guard.emplace(b.ordinal(c.stream));
    const cudaStream_t stream = b.stream(c.stream);
    if (kernels && kernel_copy(c)) {
      cuda_check(detail::launch_copy(c.to.ptr, c.from.ptr, c.bytes, stream), "launch_copy D2H");
    } else if (c.from.device && c.to.device) {
      cuda_check(cudaMemcpyPeerAsync(c.to.ptr, b.ordinal(*c.to.device), c.from.ptr, b.ordinal(*c.from.device),
                                     c.bytes, stream),
                 "cudaMemcpyPeerAsync");
    } else {
      cuda_check(cudaMemcpyAsync(c.to.ptr, c.from.ptr, c.bytes,
                                 c.to.device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream),
                 c.to.device ? "cudaMemcpyAsync H2D" : "cudaMemcpyAsync D2H");
    }
    const bool last_of_stream = i + 1 == copies.size() || copies[i + 1].stream != c.stream;
    if (record_done && last_of_stream)
      cuda_check(cudaEventRecord(b.done_event(c.stream), stream), "cudaEventRecord");
  }
}

std::size_t check_copies(Bench& b, const std::vector<RawCopy>& copies, std::uint64_t run) {
  std::size_t wrong = 0;
  for (const RawCopy& c : copies) {
    const std::uint64_t seed = Bench::seed(run, c.pattern);
    wrong += c.to.device ? b.check_device(*c.to.device, c.to.ptr, c.bytes, seed)
                         : b.check_host({c.to.ptr, c.bytes}, seed);
  }
  return wrong;
}

std::vector<std::size_t> stream_devices(const std::vector<RawCopy>& copies) {
  std::vector<std::size_t> devices;
  for (const RawCopy& c : copies) {
    if (std::find(devices.begin(), devices.end(), c.stream) == devices.end()) devices.push_back(c.stream);
  }
  return devices;
}

Case gated_copies(Bench& b, std::vector<RawCopy> copies) {
  std::vector<std::size_t> devices = stream_devices(copies);
  return {.prepare = [&b, copies](std::uint64_t run) { prepare_copies(b, copies, run); },
          .work = [&b, copies] { enqueue_copies(b, copies, false); },
          .check = [&b, copies](std::uint64_t run) { return check_copies(b, copies, run); },
          .gated = std::move(devices)};
}

Case latency_case(Bench& b, std::vector<RawCopy> copies) {
  const std::vector<std::size_t> devices = stream_devices(copies);
  return {.prepare = [&b, copies](std::uint64_t run) { prepare_copies(b, copies, run); },
          .work =
              [&b, copies, devices] {
                enqueue_copies(b, copies, true);
                b.wait_done(devices);
              },
          .check = [&b, copies](std::uint64_t run) { return check_copies(b, copies, run); },
          .min_iters = latency_iters};
}

std::shared_ptr<CUgraphExec_st> capture_graph(cudaStream_t stream, const std::function<void()>& queue,
                                              const char* what) {
  cudaGraph_t graph = nullptr;
  cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
             std::string(what) + ": begin capture");
  try {
    queue();
  } catch (...) {
    static_cast<void>(cudaStreamEndCapture(stream, &graph));
    if (graph != nullptr) static_cast<void>(cudaGraphDestroy(graph));
    throw;
  }
  cuda_check(cudaStreamEndCapture(stream, &graph), std::string(what) + ": end capture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  static_cast<void>(cudaGraphDestroy(graph));
  cuda_check(made, std::string(what) + ": instantiate");
  return {exec, [](cudaGraphExec_t e) { static_cast<void>(cudaGraphExecDestroy(e)); }};
}

namespace {

// Microseconds of the fastest of 20 replays of @p graph on @p stream (after 5), launch to synchronised.
double fastest_replay_us(const std::shared_ptr<CUgraphExec_st>& graph, cudaStream_t stream) {
  double best = 1e30;
  for (int i = 0; i < 25; ++i) {
    const auto start = std::chrono::steady_clock::now();
    cuda_check(cudaGraphLaunch(graph.get(), stream), "raw graph: launch");
    cuda_check(cudaStreamSynchronize(stream), "raw graph: synchronise");
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    if (i >= 5) best = std::min(best, took.count());
  }
  return best;
}

}  // namespace

Case graph_latency_case(Bench& b, std::vector<RawCopy> copies) {
  const std::vector<std::size_t> devices = stream_devices(copies);
  const std::size_t first = devices.front();
  const cudaStream_t stream = b.stream(first);
  const DeviceGuard guard(b.ordinal(first));  // a capturing stream is taken to be of the current device
  const auto capture = [&](bool kernel_nodes) {
    return capture_graph(
        stream,
        [&] {
          cuda_check(cudaEventRecord(b.done_event(first), stream), "raw graph: fork");
          for (const std::size_t d : devices) {
            if (d != first)
              cuda_check(cudaStreamWaitEvent(b.stream(d), b.done_event(first)), "raw graph: fork");
          }
          enqueue_copies(b, copies, true, kernel_nodes);
          for (const std::size_t d : devices) {
            if (d != first) cuda_check(cudaStreamWaitEvent(stream, b.done_event(d)), "raw graph: join");
          }
        },
        "raw graph");
  };
  // The library captures small downloads as kernel nodes, which some GPUs replay sooner than memcpy
  // nodes (src/engine/downloads.hpp): the ceiling is whichever raw graph of the two replays sooner here.
  std::shared_ptr<CUgraphExec_st> owned = capture(false);
  if (std::any_of(copies.begin(), copies.end(), kernel_copy)) {
    prepare_copies(b, copies, 0);
    std::shared_ptr<CUgraphExec_st> kernels = capture(true);
    if (fastest_replay_us(kernels, stream) < fastest_replay_us(owned, stream)) owned = std::move(kernels);
  }
  return {.prepare = [&b, copies](std::uint64_t run) { prepare_copies(b, copies, run); },
          .work =
              [owned, stream] {
                cuda_check(cudaGraphLaunch(owned.get(), stream), "raw graph: launch");
                cuda_check(cudaStreamSynchronize(stream), "raw graph: synchronise");
              },
          .check = [&b, copies](std::uint64_t run) { return check_copies(b, copies, run); },
          .min_iters = latency_iters};
}

std::optional<Stats> measure_against(Bench& b, const Case& ceiling, const Case& c) {
  if (b.options().ranks) return b.measure(c);  // a reference of --ranks: measured alone, as the ranks are
  return b.measure_interleaved(ceiling, c, ceiling_rounds, std::max(b.options().iters, c.min_iters));
}

std::optional<Stats> measure_with_ceiling(Bench& b, std::vector<RawCopy> ceiling, const Case& c) {
  return measure_against(b, gated_copies(b, std::move(ceiling)), c);
}

std::vector<RawCopy> d2h_copies(Bench& b, const std::vector<std::size_t>& devices, std::size_t size) {
  std::vector<RawCopy> copies;
  for (std::size_t k = 0; k < devices.size(); ++k) {
    const std::size_t d = devices[k];
    copies.push_back({{b.src(d), d}, {b.host_pinned().data() + k * size}, size, d, d});
  }
  return copies;
}

std::vector<RawCopy> h2d_copies(Bench& b, const std::vector<std::size_t>& devices, std::size_t size) {
  std::vector<RawCopy> copies;
  for (std::size_t k = 0; k < devices.size(); ++k) {
    const std::size_t d = devices[k];
    copies.push_back({{b.host_pinned().data() + k * size}, {b.dst(d), d}, size, d, d});
  }
  return copies;
}

}  // namespace gpuxfer::bench
