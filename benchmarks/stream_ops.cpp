// The stream-ordered forms against their blocking forms, and a 4 KiB gather replayed from a CUDA graph
// against the raw copy + event it must keep up with.
#include <memory>
#include <stdexcept>

#include "ops.hpp"
#include "raw_copies.hpp"

namespace gpuxfer::bench {
namespace {

// Fills and registers src(d) of every device, waiting for the fills (the timed call must not include them).
void prepare_sources(Bench& b, std::uint64_t run, std::size_t size) {
  for (const std::size_t d : b.all_devices()) b.fill_device(d, b.src(d), size, Bench::seed(run, d));
  for (const std::size_t d : b.all_devices()) b.register_buffer(d, b.src(d), size);
  b.synchronize();
}

// Bytes of @p out (device after device, @p size each) that differ from the sources' patterns.
std::size_t check_gathered(Bench& b, std::span<const std::byte> out, std::size_t size, std::uint64_t run) {
  std::size_t wrong = 0;
  for (std::size_t d = 0; d < b.devices(); ++d)
    wrong += b.check_host(out.subspan(d * size, size), Bench::seed(run, d));
  return wrong;
}

// gather_all_async(stream) on device 0's bench stream, then that stream synchronised.
std::optional<Stats> gather_stream(Bench& b, std::size_t size) {
  auto results = std::make_shared<std::vector<HostBuffer>>();
  return b.measure({.prepare = [&b, size](std::uint64_t run) { prepare_sources(b, run, size); },
                    .work =
                        [&b, results] {
                          GatherHandle h = b.xfer().gather_all_async(b.stream(0));
                          cuda_check(cudaStreamSynchronize(b.stream(0)),
                                     "gather_stream: the caller's stream");
                          *results = h.get();  // done already: hands the buffers over
                        },
                    .check =
                        [&b, results, size](std::uint64_t run) {
                          std::size_t wrong = results->size() == b.devices() ? 0 : b.devices() * size;
                          for (std::size_t d = 0; d < results->size() && d < b.devices(); ++d) {
                            const HostBuffer& r = (*results)[d];
                            wrong += r.size() == size ? b.check_host(r.span(), Bench::seed(run, d)) : size;
                          }
                          results->clear();
                          return wrong;
                        }});
}

// broadcast_async(pinned, stream) into dst(d) of every device on device 0's bench stream, then that stream
// synchronised; the source uses seed(run, devices()), no device's own pattern.
std::optional<Stats> bcast_pinned_stream(Bench& b, std::size_t size) {
  const std::span<std::byte> source = b.bcast_pinned().first(size);
  const auto seed = [&b](std::uint64_t run) { return Bench::seed(run, b.devices()); };
  return b.measure({.prepare =
                        [&](std::uint64_t run) {
                          parallel_fill(b.threads(), source, seed(run));
                          for (std::size_t d = 0; d < b.devices(); ++d) {
                            b.poison_device(d, b.dst(d), size);
                            b.register_buffer(d, b.dst(d), size);
                          }
                          b.synchronize();
                        },
                    .work =
                        [&] {
                          b.xfer().broadcast_async(source, b.stream(0));
                          cuda_check(cudaStreamSynchronize(b.stream(0)),
                                     "bcast_pinned_stream: the caller's stream");
                        },
                    .check =
                        [&](std::uint64_t run) {
                          std::size_t wrong = 0;
                          for (std::size_t d = 0; d < b.devices(); ++d)
                            wrong += b.check_device(d, b.dst(d), size, seed(run));
                          return wrong;
                        }});
}

// gather_into_async(pinned, stream) of 4 KiB per device captured once in a CUDA graph; a sample is the
// graph's launch and a synchronise of its stream, interleaved with the raw copies + events (latency_4k).
std::optional<Stats> latency_graph_4k(Bench& b, std::size_t) {
  const std::size_t size = latency_bytes;
  auto out = std::make_shared<PinnedMemory>(b.devices() * size);
  prepare_sources(b, 0, size);
  const cudaStream_t stream = b.stream(0);
  const DeviceGuard guard(b.ordinal(0));  // a capturing stream is taken to be of the current device
  cudaGraph_t graph = nullptr;
  cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
             "latency_graph_4k: begin capture");
  try {
    (void)b.xfer().gather_into_async(out->span(), stream);
  } catch (...) {
    static_cast<void>(cudaStreamEndCapture(stream, &graph));
    if (graph != nullptr) static_cast<void>(cudaGraphDestroy(graph));
    throw;
  }
  cuda_check(cudaStreamEndCapture(stream, &graph), "latency_graph_4k: end capture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  static_cast<void>(cudaGraphDestroy(graph));
  cuda_check(made, "latency_graph_4k: instantiate");
  const std::shared_ptr<CUgraphExec_st> owned(
      exec, [](cudaGraphExec_t e) { static_cast<void>(cudaGraphExecDestroy(e)); });
  const Case replay{
      .prepare =
          [&b, out, size](std::uint64_t run) {
            prepare_sources(b, run, size);
            parallel_poison(b.threads(), out->span());
          },
      .work =
          [owned, stream] {
            cuda_check(cudaGraphLaunch(owned.get(), stream), "latency_graph_4k: launch");
            cuda_check(cudaStreamSynchronize(stream), "latency_graph_4k: synchronise");
          },
      .check = [&b, out, size](std::uint64_t run) { return check_gathered(b, out->span(), size, run); }};
  return b.measure_interleaved(latency_case(b, d2h_copies(b, b.all_devices(), size)), replay, latency_rounds,
                               latency_iters / latency_rounds);
}

}  // namespace

std::vector<OpSpec> stream_ops() {
  const ByteRule all{"size x devices (total bytes moved)", bytes_all_devices};
  const ByteRule payload{"size (the payload: bytes / time)", bytes_payload};
  return {
      {.name = "gather_stream",
       .what = "gather_all_async(stream) + cudaStreamSynchronize: the stream-ordered form against gather "
               "(steady_clock)",
       .bytes = all,
       .ceiling = {"gather"},
       .run = gather_stream,
       .target = 0.98},
      {.name = "bcast_pinned_stream",
       .what = "broadcast_async(pinned, stream) + cudaStreamSynchronize: the stream-ordered form against "
               "bcast_pinned (steady_clock)",
       .bytes = payload,
       .ceiling = {"bcast_pinned"},
       .run = bcast_pinned_stream,
       .target = 0.98},
      {.name = "latency_graph_4k",
       .what = "gather_into_async(pinned) of 4 KiB per device captured in a CUDA graph, replayed (launch + "
               "stream synchronise): latency against one raw 4 KiB copy + event per device, interleaved; "
               "the best of 5 rounds",
       .bytes = all,
       .ceiling = {"latency_4k"},
       .fixed_size = latency_bytes,
       .run = latency_graph_4k,
       .target = 1.0,
       .time_target = true},
  };
}

}  // namespace gpuxfer::bench
