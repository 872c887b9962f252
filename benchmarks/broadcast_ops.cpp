// Broadcasts: host bytes (pinned, pageable) into every device's buffer, and device 0's buffer into every
// other device's (NCCL, peer copies). Bytes are the payload: bytes / time, as GPU.md counts them.
#include <gpuxfer/host_registration.hpp>

#include "ops.hpp"
#include "raw_copies.hpp"

namespace gpuxfer::bench {
namespace {

// Host bytes into dst(d) of every device, from a source that uses seed(run, devices()): no device's own
// pattern. @p stream_ordered: broadcast_async on device 0's bench stream, then that stream synchronised.
Case host_case(Bench& b, std::span<std::byte> source, HostBroadcastPath path, bool stream_ordered = false) {
  return {.prepare =
              [&b, source](std::uint64_t run) {
                parallel_fill(b.threads(), source, Bench::seed(run, b.devices()));
                for (std::size_t d = 0; d < b.devices(); ++d) {
                  b.poison_device(d, b.dst(d), source.size());
                  b.register_buffer(d, b.dst(d), source.size());
                }
                b.synchronize();
              },
          .work =
              [&b, source, path, stream_ordered] {
                if (!stream_ordered) return b.xfer().broadcast(source, path);
                b.xfer().broadcast_async(source, b.stream(0), path);
                cuda_check(cudaStreamSynchronize(b.stream(0)), "broadcast_async: the caller's stream");
              },
          .check =
              [&b, source](std::uint64_t run) {
                std::size_t wrong = 0;
                for (std::size_t d = 0; d < b.devices(); ++d)
                  wrong += b.check_device(d, b.dst(d), source.size(), Bench::seed(run, b.devices()));
                return wrong;
              }};
}

// Device 0's src(0) to dst(d) of every other device; the root must come out unchanged. @p stream_ordered:
// broadcast_from_device_async on device 0's bench stream, then that stream synchronised.
Case from_device_case(Bench& b, std::size_t size, DeviceBroadcastPath path, bool stream_ordered = false) {
  const auto target = [&b](std::size_t d) { return d == 0 ? b.src(0) : b.dst(d); };
  return {.prepare =
              [&b, size, target](std::uint64_t run) {
                b.fill_device(0, b.src(0), size, Bench::seed(run, 0));
                for (std::size_t d = 0; d < b.devices(); ++d) {
                  if (d != 0) b.poison_device(d, b.dst(d), size);
                  b.register_buffer(d, target(d), size);
                }
                b.synchronize();
              },
          .work =
              [&b, path, stream_ordered] {
                if (!stream_ordered) return b.xfer().broadcast_from_device(0, path);
                b.xfer().broadcast_from_device_async(0, b.stream(0), path);
                cuda_check(cudaStreamSynchronize(b.stream(0)),
                           "broadcast_from_device_async: the caller's stream");
              },
          .check =
              [&b, size, target](std::uint64_t run) {
                std::size_t wrong = 0;
                for (std::size_t d = 0; d < b.devices(); ++d)
                  wrong += b.check_device(d, target(d), size, Bench::seed(run, 0));
                return wrong;
              }};
}

const ByteRule payload{"size (the payload: bytes / time)", bytes_payload};

// Where a host broadcast's bytes come from.
enum class Source {
  pinned,      // cudaHostAlloc
  pageable,    // a std::vector: bound by the host's copy as well as by the link
  registered,  // the same std::vector registered with register_host (outside the timing)
};

// A broadcast of host memory from @p source.
OpSpec host_op(const char* name, std::string what, Source source, HostBroadcastPath path,
               std::optional<double> target, std::optional<double> one_device_target = std::nullopt) {
  const bool pageable = source == Source::pageable;
  return {.name = name,
          .what = std::move(what),
          .bytes = payload,
          .ceiling = {"ceiling_h2d_one"},
          .bounded = Bounded::one_device,
          .bound = pageable ? "ceiling_host_memcpy_t16" : "",
          .stream_bound = pageable ? stream_bound_op() : "",
          .overlap_bound = pageable ? "ceiling_host_stream_under_h2d" : "",
          .run =
              [source, path](Bench& b, std::size_t size) {
                // Interleaved with ceiling_h2d_one's copy (one link), the least disturbed round reported:
                // a pageable source, bound by the host's copy too, moves most with a busy host.
                const std::span<std::byte> data =
                    source == Source::pinned ? b.bcast_pinned().first(size) : b.host_pageable().first(size);
                const HostRegistration registration =
                    source == Source::registered ? register_host(data) : HostRegistration{};
                return measure_with_ceiling(b, h2d_copies(b, {b.devices() - 1}, size),
                                            host_case(b, data, path));
              },
          .target = target,
          .one_device_target = one_device_target};
}

// A broadcast from device 0 on @p path, against raw NCCL.
OpSpec device_op(const char* name, std::string what, DeviceBroadcastPath path, std::optional<double> target) {
  return {.name = name,
          .what = std::move(what),
          .bytes = payload,
          .ceiling = {"ceiling_nccl_bcast"},
          .bounded = Bounded::never,
          .waive = path == DeviceBroadcastPath::nccl ? needs_nccl : needs_two_devices,
          .run = [path](Bench& b, std::size_t size) { return b.measure(from_device_case(b, size, path)); },
          .target = target};
}

}  // namespace

std::vector<OpSpec> broadcast_ops() {
  // The targets are the operations', on the path each picks itself; the forced paths are shown beside
  // them (NCCL's own path can only trail raw NCCL by the host call around it).
  return {
      host_op("bcast_pinned",
              "broadcast(span over cudaHostAlloc pinned memory), automatic path, into every device "
              "(steady_clock)",
              Source::pinned, HostBroadcastPath::automatic, 1.7, 0.95),
      host_op("bcast_pinned_per_device",
              "broadcast(pinned, HostBroadcastPath::per_device): every device reads it all over its own link",
              Source::pinned, HostBroadcastPath::per_device, std::nullopt),
      host_op("bcast_pageable",
              "broadcast(span over a std::vector), automatic path, into every device (steady_clock)",
              Source::pageable, HostBroadcastPath::automatic, 0.90, 0.85),
      host_op("bcast_registered",
              "broadcast(span over a std::vector registered once with register_host), automatic path, into "
              "every device (steady_clock)",
              Source::registered, HostBroadcastPath::automatic, 1.7 * 0.97, 0.97),
      {.name = "bcast_pinned_stream",
       .what = "broadcast_async(pinned, stream) + cudaStreamSynchronize: the stream-ordered form against "
               "bcast_pinned (steady_clock)",
       .bytes = payload,
       .ceiling = {"bcast_pinned"},
       .run =
           [](Bench& b, std::size_t size) {  // interleaved with bcast_pinned's blocking call
             const std::span<std::byte> data = b.bcast_pinned().first(size);
             return measure_against(b, host_case(b, data, HostBroadcastPath::automatic),
                                    host_case(b, data, HostBroadcastPath::automatic, true));
           },
       .target = stream_form_target},
      device_op("bcast_device", "broadcast_from_device(0), automatic path (steady_clock)",
                DeviceBroadcastPath::automatic, 1.0),
      device_op("bcast_device_nccl", "broadcast_from_device(0, DeviceBroadcastPath::nccl) (steady_clock)",
                DeviceBroadcastPath::nccl, std::nullopt),
      device_op("bcast_device_peer", "broadcast_from_device(0, DeviceBroadcastPath::peer) (steady_clock)",
                DeviceBroadcastPath::peer, std::nullopt),
      {.name = "bcast_device_stream",
       .what = "broadcast_from_device_async(0, stream) + cudaStreamSynchronize: the stream-ordered form "
               "against bcast_device's blocking call (steady_clock)",
       .bytes = payload,
       .ceiling = {"bcast_device"},
       .waive = needs_two_devices,
       .run =
           [](Bench& b, std::size_t size) {
             return measure_against(b, from_device_case(b, size, DeviceBroadcastPath::automatic),
                                    from_device_case(b, size, DeviceBroadcastPath::automatic, true));
           },
       .target = stream_form_target},
  };
}

}  // namespace gpuxfer::bench
