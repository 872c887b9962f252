// Gathers: every device's buffer to pinned results (gather_all, and its stream-ordered form), into caller
// pageable memory (gather_into), into device 0's memory (gather_to_device), the seed's naive way, and the
// 4 KiB latency (of gather_all, and of a gather replayed from a CUDA graph).
#include <memory>

#include <nvtx3/nvtx3.hpp>

#include <gpuxfer/host_registration.hpp>

#include "ops.hpp"
#include "raw_copies.hpp"

namespace gpuxfer::bench {
namespace {

// Fills and registers src(d) of every device, waiting for the fills (the timed call must not include them).
void prepare_sources(Bench& b, std::uint64_t run, std::size_t size) {
  const std::vector<std::size_t> all = b.all_devices();
  for (const std::size_t d : all) b.fill_device(d, b.src(d), size, Bench::seed(run, d));
  for (const std::size_t d : all) b.register_buffer(d, b.src(d), size);
  b.synchronize();
}

// Checks one result per device (entry d holds device d's bytes); a result of the wrong size counts as
// entirely wrong.
template <class Results>
std::size_t check_results(Bench& b, const Results& results, std::uint64_t run, std::size_t size) {
  std::size_t wrong = results.size() == b.devices() ? 0 : b.devices() * size;
  for (std::size_t d = 0; d < results.size() && d < b.devices(); ++d) {
    const std::span<const std::byte> r(results[d].data(), results[d].size());
    wrong += r.size() == size ? b.check_host(r, Bench::seed(run, d)) : size;
  }
  return wrong;
}

// Checks the pieces a gather into @p capacity bytes reported, one per device: @p check_piece counts the
// wrong bytes of one that is where it may be; a missing or misplaced piece counts as entirely wrong.
template <class CheckPiece>
std::size_t check_pieces(Bench& b, const std::vector<GatherPiece>& pieces, std::size_t capacity,
                         std::size_t size, CheckPiece&& check_piece) {
  std::size_t wrong = pieces.size() == b.devices() ? 0 : capacity;
  for (const GatherPiece& p : pieces) {
    wrong += p.size == size && p.offset + size <= capacity ? check_piece(p) : size;
  }
  return wrong;
}

// gather_all() into pooled pinned HostBuffers; @p stream_ordered: gather_all_async on device 0's bench
// stream, then that stream synchronised. The case owns its results between work and check.
Case gather_case(Bench& b, std::size_t size, bool stream_ordered = false) {
  auto results = std::make_shared<std::vector<HostBuffer>>();
  return {.prepare = [&b, size](std::uint64_t run) { prepare_sources(b, run, size); },
          .work =
              [&b, results, stream_ordered] {
                if (!stream_ordered) {
                  *results = b.xfer().gather_all();
                  return;
                }
                GatherHandle h = b.xfer().gather_all_async(b.stream(0));
                cuda_check(cudaStreamSynchronize(b.stream(0)), "gather_all_async: the caller's stream");
                *results = h.get();  // done already: hands the buffers over
              },
          .check =
              [&b, results, size](std::uint64_t run) {
                const std::size_t wrong = check_results(b, *results, run, size);
                // The blocks go back to the pool poisoned: a later gather that fails to write them is
                // caught. They go back before the next sample, which must find them in the pool.
                for (HostBuffer& r : *results) parallel_poison(b.threads(), r.span());
                results->clear();
                return wrong;
              }};
}

// Interleaved with its ceiling's copies (ceiling_d2h's).
std::optional<Stats> gather(Bench& b, std::size_t size) {
  return measure_with_ceiling(b, d2h_copies(b, b.all_devices(), size), gather_case(b, size));
}

// Interleaved with gather's blocking call, its ceiling.
std::optional<Stats> gather_stream(Bench& b, std::size_t size) {
  return measure_against(b, gather_case(b, size), gather_case(b, size, true));
}

// gather_all() of 4 KiB per device interleaved with the raw copies it must keep up with (latency_4k):
// measured apart, the two drifted between processes (0.96 to 1.59 x over four runs).
std::optional<Stats> latency_gather_4k(Bench& b, std::size_t) {
  return b.measure_interleaved(latency_case(b, d2h_copies(b, b.all_devices(), latency_bytes)),
                               gather_case(b, latency_bytes), latency_rounds, latency_iters / latency_rounds);
}

// gather_into_async(pinned, stream) of 4 KiB per device captured once in a CUDA graph; a sample is the
// graph's launch and a synchronise of its stream, interleaved with the same raw copies captured in a
// graph of their own (latency_graph_raw_4k). A replayed graph skips the per-call launches that a raw copy
// + event pays (latency_4k), so that is no bound for it: on an H200 the graph ran 1.05 x faster.
std::optional<Stats> latency_graph_4k(Bench& b, std::size_t) {
  const std::size_t size = latency_bytes;
  auto out = std::make_shared<PinnedMemory>(b.devices() * size);
  prepare_sources(b, 0, size);
  const cudaStream_t stream = b.stream(0);
  const DeviceGuard guard(b.ordinal(0));  // a capturing stream is taken to be of the current device
  std::vector<GatherPiece> pieces;  // where every replay writes each device's bytes
  const std::shared_ptr<CUgraphExec_st> owned = capture_graph(
      stream, [&] { pieces = b.xfer().gather_into_async(out->span(), stream); }, "latency_graph_4k");
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
      .check =
          [&b, out, pieces, size](std::uint64_t run) {
            return check_pieces(b, pieces, out->size(), size, [&](const GatherPiece& p) {
              return b.check_host(out->span().subspan(p.offset, size), Bench::seed(run, p.device));
            });
          }};
  return b.measure_interleaved(graph_latency_case(b, d2h_copies(b, b.all_devices(), size)), replay,
                               latency_rounds, latency_iters / latency_rounds);
}

// gather_into(out) of every device's buffer; @p stream_ordered: gather_into_async on device 0's bench
// stream, then that stream synchronised. The case owns its pieces between work and check.
Case into_host_case(Bench& b, std::span<std::byte> out, std::size_t size, bool stream_ordered = false) {
  auto pieces = std::make_shared<std::vector<GatherPiece>>();
  return {.prepare =
              [&b, out, size](std::uint64_t run) {
                prepare_sources(b, run, size);
                parallel_poison(b.threads(), out);
              },
          .work =
              [&b, out, pieces, stream_ordered] {
                if (!stream_ordered) {
                  *pieces = b.xfer().gather_into(out);
                  return;
                }
                *pieces = b.xfer().gather_into_async(out, b.stream(0));
                cuda_check(cudaStreamSynchronize(b.stream(0)), "gather_into_async: the caller's stream");
              },
          .check =
              [&b, out, pieces, size](std::uint64_t run) {
                return check_pieces(b, *pieces, out.size(), size, [&](const GatherPiece& p) {
                  return b.check_host(out.subspan(p.offset, size), Bench::seed(run, p.device));
                });
              }};
}

// gather_into() ordinary memory, or the same memory registered with register_host (outside the timing),
// interleaved with ceiling_d2h's copies, the least disturbed round reported: the pageable gather, bound
// by the host's copy too, moves most with a busy host.
std::optional<Stats> gather_into_host(Bench& b, std::size_t size, bool registered) {
  const std::span<std::byte> out = b.host_pageable().first(b.devices() * size);
  const HostRegistration registration = registered ? register_host(out) : HostRegistration{};
  return measure_with_ceiling(b, d2h_copies(b, b.all_devices(), size), into_host_case(b, out, size));
}

// gather_into_async into registered memory interleaved with gather_into's blocking call, its ceiling.
std::optional<Stats> gather_registered_stream(Bench& b, std::size_t size) {
  const std::span<std::byte> out = b.host_pageable().first(b.devices() * size);
  const HostRegistration registration = register_host(out);
  return measure_against(b, into_host_case(b, out, size), into_host_case(b, out, size, true));
}

// The seed's gather: per call and per device a fresh cudaHostAlloc staging buffer and its copy queued,
// then device after device: wait, copy into a new std::vector, cudaFreeHost.
std::vector<std::vector<std::byte>> naive_gather_once(Bench& b, std::size_t size) {
  nvtx3::scoped_range range{"naive_gather"};
  std::vector<PinnedMemory> staging;
  for (std::size_t d = 0; d < b.devices(); ++d) {
    DeviceGuard guard(b.ordinal(d));
    staging.emplace_back(size, cudaHostAllocDefault);
    cuda_check(cudaMemcpyAsync(staging.back().data(), b.src(d), size, cudaMemcpyDeviceToHost, b.stream(d)),
               "naive gather: cudaMemcpyAsync D2H");
  }
  std::vector<std::vector<std::byte>> out;
  for (std::size_t d = 0; d < b.devices(); ++d) {
    cuda_check(cudaStreamSynchronize(b.stream(d)), "naive gather: cudaStreamSynchronize");
    out.emplace_back(staging[d].data(), staging[d].data() + size);
    staging[d].reset();
  }
  return out;
}

std::optional<Stats> naive_gather(Bench& b, std::size_t size) {
  std::vector<std::vector<std::byte>> results;
  return b.measure({.prepare = [&](std::uint64_t run) { b.fill_sources(run, size, b.all_devices()); },
                    .work = [&] { results = naive_gather_once(b, size); },
                    .check = [&](std::uint64_t run) { return check_results(b, results, run, size); }});
}

// gather_to_device(0) into gathered(); @p stream_ordered: gather_to_device_async on device 0's bench
// stream, then that stream synchronised.
Case to_device_case(Bench& b, std::size_t size, bool stream_ordered = false) {
  const std::size_t capacity = b.devices() * size;
  auto pieces = std::make_shared<std::vector<GatherPiece>>();
  return {.prepare =
              [&b, size, capacity](std::uint64_t run) {
                prepare_sources(b, run, size);
                b.poison_device(0, b.gathered(), capacity);
                b.synchronize();
              },
          .work =
              [&b, pieces, capacity, stream_ordered] {
                if (!stream_ordered) {
                  *pieces = b.xfer().gather_to_device(0, b.gathered(), capacity);
                  return;
                }
                *pieces = b.xfer().gather_to_device_async(0, b.gathered(), capacity, b.stream(0));
                cuda_check(cudaStreamSynchronize(b.stream(0)), "gather_to_device_async: the caller's stream");
              },
          .check =
              [&b, pieces, size, capacity](std::uint64_t run) {
                return check_pieces(b, *pieces, capacity, size, [&](const GatherPiece& p) {
                  return b.check_device(0, b.gathered() + p.offset, size, Bench::seed(run, p.device));
                });
              }};
}

std::optional<Stats> gather_to_device(Bench& b, std::size_t size) {
  return b.measure(to_device_case(b, size));
}

// Interleaved with gather_to_device's blocking call, its ceiling.
std::optional<Stats> gather_to_device_stream(Bench& b, std::size_t size) {
  return measure_against(b, to_device_case(b, size), to_device_case(b, size, true));
}

}  // namespace

std::vector<OpSpec> gather_ops() {
  const ByteRule all{"size x devices (total bytes moved)", bytes_all_devices};
  return {
      {.name = "gather",
       .what = "gather_all(): every device's buffer into pooled pinned HostBuffers (steady_clock)",
       .bytes = all,
       .ceiling = {"ceiling_d2h"},
       .run = gather,
       .target = 0.95},
      {.name = "gather_pageable",
       .what = "gather_into(std::vector): every device's buffer into caller pageable memory (steady_clock)",
       .bytes = all,
       .ceiling = {"ceiling_d2h"},
       .bound = "ceiling_host_memcpy_t16",
       .stream_bound = stream_bound_op(),
       .run = [](Bench& b, std::size_t size) { return gather_into_host(b, size, false); },
       .target = 0.90},
      {.name = "gather_registered",
       .what =
           "gather_into(std::vector registered once with register_host): DMA straight into it (steady_clock)",
       .bytes = all,
       .ceiling = {"ceiling_d2h"},
       .run = [](Bench& b, std::size_t size) { return gather_into_host(b, size, true); },
       .target = 0.97},
      {.name = "naive_gather",
       .kind = Kind::naive,
       .what = "the seed's way: fresh cudaHostAlloc staging per call and device, wait device by device, "
               "copy into new std::vectors, cudaFreeHost (steady_clock)",
       .bytes = all,
       .ceiling = {"ceiling_d2h"},
       .run = naive_gather},
      {.name = "gather_to_device",
       .what = "gather_to_device(0): every device's buffer concatenated in device 0's memory (steady_clock)",
       .bytes = all,
       .ceiling = {"ceiling_to_device"},
       .run = gather_to_device},
      {.name = "latency_gather_4k",
       .what =
           "gather_all() of 4 KiB per device: latency against one raw 4 KiB copy + event per device, "
           "the two interleaved sample by sample; the least disturbed of 5 rounds (medians within a round)",
       .bytes = all,
       .ceiling = {"latency_4k"},
       .fixed_size = latency_bytes,
       .run = latency_gather_4k,
       .target = 1.0 / 1.2,
       .time_target = true},
      {.name = "gather_stream",
       .what = "gather_all_async(stream) + cudaStreamSynchronize: the stream-ordered form against gather "
               "(steady_clock)",
       .bytes = all,
       .ceiling = {"gather"},
       .run = gather_stream,
       .target = stream_form_target},
      {.name = "gather_registered_stream",
       .what = "gather_into_async(registered, stream) + cudaStreamSynchronize: the stream-ordered form "
               "against gather_registered's blocking call (steady_clock)",
       .bytes = all,
       .ceiling = {"gather_registered"},
       .run = gather_registered_stream,
       .target = stream_form_target},
      {.name = "gather_to_device_stream",
       .what = "gather_to_device_async(0, stream) + cudaStreamSynchronize: the stream-ordered form "
               "against gather_to_device (steady_clock)",
       .bytes = all,
       .ceiling = {"gather_to_device"},
       .run = gather_to_device_stream,
       .target = stream_form_target},
      {.name = "latency_graph_4k",
       .what = "gather_into_async(pinned) of 4 KiB per device captured in a CUDA graph, replayed (launch + "
               "stream synchronise): latency against the same raw copies captured in a graph, interleaved; "
               "the least disturbed of 5 rounds",
       .bytes = all,
       .ceiling = {"latency_graph_raw_4k"},
       .fixed_size = latency_bytes,
       .run = latency_graph_4k,
       .target = 1.0 / 1.05,
       .time_target = true},
  };
}

}  // namespace gpuxfer::bench
