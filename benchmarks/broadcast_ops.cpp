// Broadcasts: host bytes (pinned, pageable) into every device's buffer, and device 0's buffer into every
// other device's (NCCL, peer copies). Bytes are the payload: bytes / time, as GPU.md counts them.
#include "ops.hpp"

namespace gpuxfer::bench {
namespace {

// Poisons and registers dst(d) of every device.
void prepare_targets(Bench& b, std::size_t size) {
  for (std::size_t d = 0; d < b.devices(); ++d) {
    b.poison_device(d, b.dst(d), size);
    b.register_buffer(d, b.dst(d), size);
  }
}

// Host sources use seed(run, devices()): no device's own pattern.
std::optional<Stats> from_host(Bench& b, std::span<std::byte> source, HostBroadcastPath path) {
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    const std::uint64_t seed = Bench::seed(run, b.devices());
    parallel_fill(b.threads(), source, seed);
    prepare_targets(b, source.size());
    b.synchronize();
    Sample s;
    s.seconds = host_seconds([&] { b.xfer().broadcast(source, path); });
    for (std::size_t d = 0; d < b.devices(); ++d) s.wrong += b.check_device(d, b.dst(d), source.size(), seed);
    return s;
  });
}

std::optional<Stats> bcast_pinned(Bench& b, std::size_t size) {
  return from_host(b, b.bcast_pinned().first(size), HostBroadcastPath::automatic);
}
std::optional<Stats> bcast_pinned_per_device(Bench& b, std::size_t size) {
  return from_host(b, b.bcast_pinned().first(size), HostBroadcastPath::per_device);
}
std::optional<Stats> bcast_pageable(Bench& b, std::size_t size) {
  return from_host(b, b.host_pageable().first(size), HostBroadcastPath::automatic);
}

// Device 0's src(0) to dst(d) of every other device; the root must come out unchanged.
std::optional<Stats> from_device(Bench& b, std::size_t size, DeviceBroadcastPath path) {
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    const std::uint64_t seed = Bench::seed(run, 0);
    b.fill_device(0, b.src(0), size, seed);
    b.register_buffer(0, b.src(0), size);
    for (std::size_t d = 1; d < b.devices(); ++d) {
      b.poison_device(d, b.dst(d), size);
      b.register_buffer(d, b.dst(d), size);
    }
    b.synchronize();
    Sample s;
    s.seconds = host_seconds([&] { b.xfer().broadcast_from_device(0, path); });
    s.wrong = b.check_device(0, b.src(0), size, seed);
    for (std::size_t d = 1; d < b.devices(); ++d) s.wrong += b.check_device(d, b.dst(d), size, seed);
    return s;
  });
}

std::optional<Stats> bcast_device(Bench& b, std::size_t size) {
  return from_device(b, size, DeviceBroadcastPath::automatic);
}
std::optional<Stats> bcast_device_nccl(Bench& b, std::size_t size) {
  return from_device(b, size, DeviceBroadcastPath::nccl);
}
std::optional<Stats> bcast_device_peer(Bench& b, std::size_t size) {
  return from_device(b, size, DeviceBroadcastPath::peer);
}

}  // namespace

std::vector<OpSpec> broadcast_ops() {
  const std::string payload = "size (the payload: bytes / time)";
  return {
      {.name = "bcast_pinned",
       .kind = Kind::gpuxfer,
       .what = "broadcast(span over cudaHostAlloc pinned memory), automatic path, into every device "
               "(steady_clock)",
       .bytes_rule = payload,
       .bytes = bytes_payload,
       .ceiling = {"ceiling_h2d_one"},
       .run = bcast_pinned,
       .target = 1.7},
      {.name = "bcast_pinned_per_device",
       .kind = Kind::gpuxfer,
       .what =
           "broadcast(pinned, HostBroadcastPath::per_device): every device reads it all over its own link",
       .bytes_rule = payload,
       .bytes = bytes_payload,
       .ceiling = {"ceiling_h2d_one"},
       .run = bcast_pinned_per_device},
      {.name = "bcast_pageable",
       .kind = Kind::gpuxfer,
       .what = "broadcast(span over a std::vector), automatic path, into every device (steady_clock)",
       .bytes_rule = payload,
       .bytes = bytes_payload,
       .ceiling = {"ceiling_h2d_one"},
       .bound = "ceiling_host_memcpy_t16",
       .run = bcast_pageable,
       .target = 0.90},
      // The target is the operation's, on the path it picks itself; the forced paths are shown beside it
      // (NCCL's own path can only trail raw NCCL by the host call around it).
      {.name = "bcast_device",
       .kind = Kind::gpuxfer,
       .what = "broadcast_from_device(0), automatic path (steady_clock)",
       .bytes_rule = payload,
       .bytes = bytes_payload,
       .ceiling = {"ceiling_nccl_bcast"},
       .waive = needs_two_devices,
       .run = bcast_device,
       .target = 1.0},
      {.name = "bcast_device_nccl",
       .kind = Kind::gpuxfer,
       .what = "broadcast_from_device(0, DeviceBroadcastPath::nccl) (steady_clock)",
       .bytes_rule = payload,
       .bytes = bytes_payload,
       .ceiling = {"ceiling_nccl_bcast"},
       .waive = needs_nccl,
       .run = bcast_device_nccl},
      {.name = "bcast_device_peer",
       .kind = Kind::gpuxfer,
       .what = "broadcast_from_device(0, DeviceBroadcastPath::peer) (steady_clock)",
       .bytes_rule = payload,
       .bytes = bytes_payload,
       .ceiling = {"ceiling_nccl_bcast"},
       .waive = needs_two_devices,
       .run = bcast_device_peer},
  };
}

}  // namespace gpuxfer::bench
