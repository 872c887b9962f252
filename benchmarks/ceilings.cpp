// The ceilings, measured in the same run as gpuxfer's numbers: raw cudaMemcpyAsync / cudaMemcpyPeerAsync /
// ncclBroadcast on the bench's own streams, timed with events behind the spin gate, and the host's own
// memcpy and launch latency, timed with steady_clock. Their data is verified like everything else.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>

#include "hostops/shared_segment.hpp"
#include "memory/streaming_copy.hpp"
#include "ops.hpp"
#include "raw_copies.hpp"

namespace gpuxfer::bench {
namespace {

const ByteRule all{"size x devices", bytes_all_devices};
const ByteRule payload{"size", bytes_payload};

std::vector<RawCopy> d2h_every(Bench& b, std::size_t size) { return d2h_copies(b, b.all_devices(), size); }
std::vector<RawCopy> d2h_first(Bench& b, std::size_t size) { return d2h_copies(b, {0}, size); }
std::vector<RawCopy> h2d_every(Bench& b, std::size_t size) { return h2d_copies(b, b.all_devices(), size); }
std::vector<RawCopy> h2d_last(Bench& b, std::size_t size) { return h2d_copies(b, {b.devices() - 1}, size); }

std::vector<RawCopy> peer_0_to_1(Bench& b, std::size_t size) {
  return {{{b.src(0), 0}, {b.dst(1), 1}, size, 0, 0}};
}

// Every device's buffer into its slice of device 0's gathered(), each pushed on its own stream.
std::vector<RawCopy> into_device_0(Bench& b, std::size_t size) {
  std::vector<RawCopy> copies;
  for (const std::size_t d : b.all_devices())
    copies.push_back({{b.src(d), d}, {b.gathered() + d * size, 0}, size, d, d});
  return copies;
}

// The raw-copy ceilings, one row each: bandwidths timed with events behind the spin gate, and the 4 KiB
// latencies (a blocking caller's view: steady_clock around queueing the copies and waiting for them, or
// around replaying them captured in a CUDA graph).
enum class Clock { events, latency, graph };

struct CopyCeiling {
  const char* name;
  const char* what;
  const ByteRule& bytes;
  std::vector<RawCopy> (*plan)(Bench&, std::size_t size);
  Clock clock = Clock::events;
  std::optional<std::string> (*waive)(Bench&) = nullptr;
};

const CopyCeiling copy_ceilings[] = {
    {"ceiling_d2h", "raw cudaMemcpyAsync D2H into pinned memory, every device at once", all, d2h_every},
    {"ceiling_d2h_one", "raw cudaMemcpyAsync D2H into pinned memory, device 0 alone", payload, d2h_first},
    {"ceiling_h2d", "raw cudaMemcpyAsync H2D from pinned memory, every device at once", all, h2d_every},
    {"ceiling_h2d_one", "raw cudaMemcpyAsync H2D from pinned memory, the last device alone: one link",
     payload, h2d_last},
    {"ceiling_peer", "raw cudaMemcpyPeerAsync device 0 -> 1, peer access on", payload, peer_0_to_1,
     Clock::events, needs_peer_access},
    {"ceiling_to_device",
     "raw cudaMemcpyPeerAsync of every device's buffer into device 0, each on its own stream", all,
     into_device_0},
    {"latency_4k_one", "one 4 KiB cudaMemcpyAsync D2H + event wait, device 0", payload, d2h_first,
     Clock::latency},
    {"latency_4k", "one 4 KiB cudaMemcpyAsync D2H + event per device, wait for all", all, d2h_every,
     Clock::latency},
    {"latency_graph_raw_4k",
     "one 4 KiB D2H per device captured in a CUDA graph, as memcpy or kernel nodes (whichever replays "
     "sooner); launch + stream synchronise",
     all, d2h_every, Clock::graph},
};

OpSpec copy_ceiling(const CopyCeiling& c) {
  const bool latency = c.clock != Clock::events;
  return {.name = c.name,
          .kind = Kind::ceiling,
          .what = std::string(c.what) + (latency ? " (steady_clock)" : " (events, spin gate)"),
          .bytes = c.bytes,
          .fixed_size = latency ? latency_bytes : 0,
          .waive = c.waive,
          .run = [clock = c.clock, plan = c.plan](Bench& b, std::size_t size) {
            switch (clock) {
              case Clock::latency:
                return b.measure(latency_case(b, plan(b, size)));
              case Clock::graph:
                return b.measure(graph_latency_case(b, plan(b, size)));
              case Clock::events:
                break;
            }
            return b.measure(gated_copies(b, plan(b, size)));
          }};
}

// ncclBroadcast of device 0's buffer (in place on the root, as gpuxfer does) into every other device's.
std::optional<Stats> nccl_bcast(Bench& b, std::size_t size) {
  const std::vector<std::size_t> devices = b.all_devices();
  const NcclComms& comms = b.nccl();
  const auto buffer = [&](std::size_t d) { return d == 0 ? b.src(0) : b.dst(d); };
  return b.measure({.prepare =
                        [&](std::uint64_t run) {
                          b.fill_device(0, b.src(0), size, Bench::seed(run, 0));
                          for (std::size_t d = 1; d < devices.size(); ++d) b.poison_device(d, b.dst(d), size);
                          b.synchronize();
                        },
                    .work =
                        [&] {
                          nccl_group(devices, "ncclBroadcast", [&](std::size_t d) {
                            return ncclBroadcast(d == 0 ? buffer(d) : nullptr, buffer(d), size, ncclUint8, 0,
                                                 comms.get(d), b.stream(d));
                          });
                        },
                    .check =
                        [&](std::uint64_t run) {
                          std::size_t wrong = 0;  // the root too: it must come out unchanged
                          for (const std::size_t d : devices)
                            wrong += b.check_device(d, buffer(d), size, Bench::seed(run, 0));
                          return wrong;
                        },
                    .gated = devices});
}

// The streaming-store copy runs on 8 and 16 threads and on every core: the library's host_threads is
// chosen from these.
std::vector<std::size_t> stream_thread_counts() {
  std::vector<std::size_t> counts{8, 16};
  if (const std::size_t all = all_cores(); all != 8 && all != 16) counts.push_back(all);
  return counts;
}

// memcpy of size x devices bytes from pageable to pinned memory on @p threads threads, libc's or with the
// library's streaming stores: what bounds every path that touches pageable memory.
OpSpec host_memcpy_ceiling(std::size_t threads, bool streaming) {
  const std::string n = std::to_string(threads);
  return {
      .name = std::string(streaming ? "ceiling_host_stream_t" : "ceiling_host_memcpy_t") + n,
      .kind = Kind::ceiling,
      .what = std::string(streaming ? "host copy with streaming stores (" + std::string(detail::to_string(detail::copy_kernel())) + ")" : "host memcpy (libc)") +
              " pageable -> pinned, " + n + (threads == 1 ? " thread" : " threads") + " (steady_clock)",
      .bytes = all,
      .run = [threads, streaming](Bench& b, std::size_t size) {
        const std::size_t bytes = b.devices() * size;
        const std::span<std::byte> from = b.host_pageable().first(bytes);
        const std::span<std::byte> to = b.host_pinned().first(bytes);
        return b.measure({.prepare =
                              [&](std::uint64_t run) {
                                parallel_fill(b.threads(), from, Bench::seed(run, 0));
                                parallel_poison(b.threads(), to);
                              },
                          .work = [&] { parallel_copy(b.threads(), threads, streaming, to.data(), from.data(), bytes); },
                          .check = [&](std::uint64_t run) { return b.check_host(to, Bench::seed(run, 0)); }});
      }};
}

// The streaming-store host copy of the pageable broadcast (pageable -> pinned) while every device's H2D
// reads other pinned memory: what its staging ring can reach at most on this host, where the copy and
// the DMA share the memory (the ring's slots are written with streaming stores, so the DMA reads them from
// memory as it reads this one). On the library's worker count (Options::host_threads), which the ring
// runs on; three copies per device are queued first, so that the links stay busy for the whole host copy.
// The downloads have no such bound: their DMA writes land in the cache the copy-out then reads (on the
// runner gather_pageable ran at 1.79 x the same copy measured pinned -> pageable under D2H).
OpSpec host_copy_under_h2d_ceiling() {
  return {
      .name = "ceiling_host_stream_under_h2d",
      .kind = Kind::ceiling,
      .what = std::string("host copy with streaming stores (") + std::string(detail::to_string(detail::copy_kernel())) +
              ") pageable -> pinned while every device's H2D reads other pinned memory, on the library's "
              "host_threads (steady_clock)",
      .bytes = payload,
      .run = [](Bench& b, std::size_t size) {
        const std::size_t threads = b.manager().options().host_threads;
        const std::span<std::byte> from = b.host_pageable().first(size);
        const std::span<std::byte> to = b.host_pinned().first(size);
        auto link = std::make_shared<PinnedMemory>(size);  // the DMA's side
        constexpr int link_copies = 3;
        return b.measure(
            {.prepare =
                 [&, link](std::uint64_t run) {
                   parallel_fill(b.threads(), from, Bench::seed(run, 0));
                   parallel_poison(b.threads(), to);
                   for (const std::size_t d : b.all_devices()) {
                     DeviceGuard guard(b.ordinal(d));
                     for (int i = 0; i < link_copies; ++i) {
                       cuda_check(cudaMemcpyAsync(b.dst(d), link->data(), size, cudaMemcpyHostToDevice, b.stream(d)),
                                  "queueing the links' copies");
                     }
                   }
                 },
             .work = [&] { parallel_copy(b.threads(), threads, true, to.data(), from.data(), size); },
             .check =
                 [&](std::uint64_t run) {
                   b.synchronize();
                   return b.check_host(to, Bench::seed(run, 0));
                 }});
      }};
}

// The start of part @p part of the @p bytes at @p base split in @p parts, on a page boundary, so that no
// two parts share a page (CUDA registers whole pages: a page registered twice fails the second time).
std::size_t page_boundary(const std::byte* base, std::size_t bytes, std::size_t parts, std::size_t part) {
  if (part == 0) return 0;
  if (part >= parts) return bytes;
  const auto page = static_cast<std::uintptr_t>(detail::page_size());
  const auto start = reinterpret_cast<std::uintptr_t>(base);
  const std::uintptr_t at = (start + bytes / parts * part) & ~(page - 1);
  return std::clamp<std::size_t>(at > start ? at - start : 0, 0, bytes);
}

// cudaHostRegister + cudaHostUnregister (portable, as register_host does) of size x devices bytes of the
// bench's pageable memory (written before, so its pages are there), split over @p threads threads, each a
// range of whole pages of its own: what page-locking a pageable range for one call would cost, against
// the host copy through the staging ring that the pageable paths pay instead. A part of a pageable gather
// or broadcast registered for the call could go to or from the link by DMA while the ring carries the
// rest; this says at what rate. Informational: where CUDA refuses the registration (tried once first),
// the row is waived with CUDA's reason on stderr, and the run goes on.
OpSpec host_register_ceiling(std::size_t threads) {
  const std::string n = std::to_string(threads);
  return {
      .name = "ceiling_host_register_t" + n,
      .kind = Kind::ceiling,
      .what = "cudaHostRegister (portable) + cudaHostUnregister of pageable memory (raw), " + n +
              (threads == 1 ? " thread" : " threads, each its own pages") + " (steady_clock)",
      .bytes = all,
      .run = [threads](Bench& b, std::size_t size) -> std::optional<Stats> {
        const std::size_t bytes = b.devices() * size;
        const std::span<std::byte> range = b.host_pageable().first(bytes);
        const int ordinal = b.ordinal(0);
        const auto registered = [&](std::size_t begin, std::size_t end) {
          const DeviceGuard guard(ordinal);  // the bench's devices' context, not device 0's by default
          void* at = range.data() + begin;
          const cudaError_t rc = cudaHostRegister(at, end - begin, cudaHostRegisterPortable);
          if (rc == cudaSuccess) return cudaHostUnregister(at);
          (void)cudaGetLastError();
          return rc;
        };
        if (const cudaError_t rc = registered(0, bytes); rc != cudaSuccess) {
          std::fprintf(stderr, "ceiling_host_register_t%zu: %s (%s)\n", threads, cudaGetErrorName(rc),
                       cudaGetErrorString(rc));
          return std::nullopt;
        }
        const std::size_t parts = std::min(threads, b.threads().size());
        const auto part = [&](std::size_t i) {
          const std::size_t begin = page_boundary(range.data(), bytes, parts, i);
          const std::size_t end = page_boundary(range.data(), bytes, parts, i + 1);
          if (end != begin) cuda_check(registered(begin, end), "cudaHostRegister + cudaHostUnregister");
        };
        return b.measure({.prepare = [&](std::uint64_t run) { parallel_fill(b.threads(), range, Bench::seed(run, 0)); },
                          .work = [&] { b.threads().run(parts, part); },
                          .check = [&](std::uint64_t run) { return b.check_host(range, Bench::seed(run, 0)); }});
      },
      .waived_note = "cudaHostRegister refused the bench's pageable memory (CUDA's reason on stderr)"};
}

}  // namespace

std::size_t all_cores() { return std::max<std::size_t>(1, std::thread::hardware_concurrency()); }

std::string stream_bound_op() { return "ceiling_host_stream_t" + std::to_string(all_cores()); }

std::vector<OpSpec> ceiling_ops() {
  std::vector<OpSpec> ops;
  for (const CopyCeiling& c : copy_ceilings) {
    if (c.clock == Clock::events) ops.push_back(copy_ceiling(c));
  }
  ops.push_back(
      {.name = "ceiling_nccl_bcast",
       .kind = Kind::ceiling,
       .what = "raw ncclBroadcast from device 0 over every device, communicators from ncclCommInitAll, warm",
       .bytes = payload,
       .waive = needs_nccl,
       .run = nccl_bcast});
  for (const std::size_t threads : {1, 8, 16}) ops.push_back(host_memcpy_ceiling(threads, false));
  for (const std::size_t threads : stream_thread_counts()) ops.push_back(host_memcpy_ceiling(threads, true));
  ops.push_back(host_copy_under_h2d_ceiling());
  for (const std::size_t threads : {1, 4}) ops.push_back(host_register_ceiling(threads));
  for (const CopyCeiling& c : copy_ceilings) {
    if (c.clock != Clock::events) ops.push_back(copy_ceiling(c));
  }
  return ops;
}

}  // namespace gpuxfer::bench
