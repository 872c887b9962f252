// The ceilings, measured in the same run as gpuxfer's numbers: raw cudaMemcpyAsync / cudaMemcpyPeerAsync /
// ncclBroadcast on the bench's own streams, timed with events behind the spin gate, and the host's own
// memcpy and launch latency, timed with steady_clock. Their data is verified like everything else.
#include <cstring>

#include "ops.hpp"

namespace gpuxfer::bench {
namespace {

constexpr std::size_t latency_bytes = 4096;
constexpr int latency_iters = 50;

// Concurrent pinned D2H of src(d) from every device in @p devices into its slice of host_pinned().
std::optional<Stats> d2h(Bench& b, const std::vector<std::size_t>& devices, std::size_t size) {
  const std::span<std::byte> host = b.host_pinned();
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    b.fill_sources(run, size, devices);
    parallel_poison(b.threads(), host.first(devices.size() * size));
    Sample s;
    s.seconds = b.timer().time(devices, [&] {
      for (std::size_t k = 0; k < devices.size(); ++k) {
        DeviceGuard guard(b.ordinal(devices[k]));
        cuda_check(cudaMemcpyAsync(host.data() + k * size, b.src(devices[k]), size, cudaMemcpyDeviceToHost,
                                   b.stream(devices[k])),
                   "cudaMemcpyAsync D2H");
      }
    });
    for (std::size_t k = 0; k < devices.size(); ++k) {
      s.wrong += b.check_host(host.subspan(k * size, size), Bench::seed(run, devices[k]));
    }
    return s;
  });
}

// Concurrent pinned H2D into dst(d) of every device in @p devices, each from its own slice of host_pinned().
std::optional<Stats> h2d(Bench& b, const std::vector<std::size_t>& devices, std::size_t size) {
  const std::span<std::byte> host = b.host_pinned();
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    for (std::size_t k = 0; k < devices.size(); ++k) {
      parallel_fill(b.threads(), host.subspan(k * size, size), Bench::seed(run, devices[k]));
      b.poison_device(devices[k], b.dst(devices[k]), size);
    }
    b.synchronize();
    Sample s;
    s.seconds = b.timer().time(devices, [&] {
      for (std::size_t k = 0; k < devices.size(); ++k) {
        DeviceGuard guard(b.ordinal(devices[k]));
        cuda_check(cudaMemcpyAsync(b.dst(devices[k]), host.data() + k * size, size, cudaMemcpyHostToDevice,
                                   b.stream(devices[k])),
                   "cudaMemcpyAsync H2D");
      }
    });
    for (const std::size_t d : devices) s.wrong += b.check_device(d, b.dst(d), size, Bench::seed(run, d));
    return s;
  });
}

std::optional<Stats> ceiling_d2h(Bench& b, std::size_t size) { return d2h(b, b.all_devices(), size); }
std::optional<Stats> ceiling_d2h_one(Bench& b, std::size_t size) { return d2h(b, {0}, size); }
std::optional<Stats> ceiling_h2d(Bench& b, std::size_t size) { return h2d(b, b.all_devices(), size); }
std::optional<Stats> ceiling_h2d_one(Bench& b, std::size_t size) { return h2d(b, {b.devices() - 1}, size); }

std::optional<Stats> ceiling_peer(Bench& b, std::size_t size) {
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    b.fill_sources(run, size, {0});
    b.poison_device(1, b.dst(1), size);
    b.synchronize();
    Sample s;
    s.seconds = b.timer().time({0}, [&] {
      DeviceGuard guard(b.ordinal(0));
      cuda_check(cudaMemcpyPeerAsync(b.dst(1), b.ordinal(1), b.src(0), b.ordinal(0), size, b.stream(0)),
                 "cudaMemcpyPeerAsync");
    });
    s.wrong = b.check_device(1, b.dst(1), size, Bench::seed(run, 0));
    return s;
  });
}

// Every device's buffer into its slice of device 0's gathered(), each pushed on its own stream.
std::optional<Stats> ceiling_to_device(Bench& b, std::size_t size) {
  const std::vector<std::size_t> all = b.all_devices();
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    b.fill_sources(run, size, all);
    b.poison_device(0, b.gathered(), all.size() * size);
    b.synchronize();
    Sample s;
    s.seconds = b.timer().time(all, [&] {
      for (const std::size_t d : all) {
        DeviceGuard guard(b.ordinal(d));
        cuda_check(cudaMemcpyPeerAsync(b.gathered() + d * size, b.ordinal(0), b.src(d), b.ordinal(d), size,
                                       b.stream(d)),
                   "cudaMemcpyPeerAsync to device 0");
      }
    });
    for (const std::size_t d : all)
      s.wrong += b.check_device(0, b.gathered() + d * size, size, Bench::seed(run, d));
    return s;
  });
}

// ncclBroadcast of device 0's buffer (in place on the root, as gpuxfer does) into every other device's.
std::optional<Stats> ceiling_nccl_bcast(Bench& b, std::size_t size) {
  const std::vector<std::size_t> all = b.all_devices();
  const NcclComms& comms = b.nccl();
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    b.fill_sources(run, size, {0});
    for (std::size_t d = 1; d < all.size(); ++d) b.poison_device(d, b.dst(d), size);
    b.synchronize();
    Sample s;
    s.seconds = b.timer().time(all, [&] {
      nccl_check(ncclGroupStart(), "ncclGroupStart");
      for (const std::size_t d : all) {
        std::byte* buffer = d == 0 ? b.src(0) : b.dst(d);
        const ncclResult_t r =
            ncclBroadcast(d == 0 ? buffer : nullptr, buffer, size, ncclUint8, 0, comms.get(d), b.stream(d));
        if (r != ncclSuccess) {
          static_cast<void>(ncclGroupEnd());
          nccl_check(r, "ncclBroadcast");
        }
      }
      nccl_check(ncclGroupEnd(), "ncclGroupEnd");
    });
    for (std::size_t d = 1; d < all.size(); ++d)
      s.wrong += b.check_device(d, b.dst(d), size, Bench::seed(run, 0));
    s.wrong += b.check_device(0, b.src(0), size, Bench::seed(run, 0));
    return s;
  });
}

// memcpy of size x devices bytes from pageable to pinned memory on Threads threads: what bounds every
// path that touches pageable memory.
template <std::size_t Threads>
std::optional<Stats> ceiling_host_memcpy(Bench& b, std::size_t size) {
  const std::size_t bytes = b.devices() * size;
  const std::span<std::byte> from = b.host_pageable().first(bytes);
  const std::span<std::byte> to = b.host_pinned().first(bytes);
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    parallel_fill(b.threads(), from, Bench::seed(run, 0));
    parallel_poison(b.threads(), to);
    Sample s;
    s.seconds = host_seconds([&] { parallel_copy(b.threads(), Threads, to.data(), from.data(), bytes); });
    s.wrong = b.check_host(to, Bench::seed(run, 0));
    return s;
  });
}

// One 4 KiB cudaMemcpyAsync D2H per device in @p devices, an event after each, wait for all: the least a
// blocking small gather can cost.
std::optional<Stats> latency(Bench& b, const std::vector<std::size_t>& devices) {
  const std::span<std::byte> host = b.host_pinned();
  return b.measure(
      [&](std::uint64_t run) -> std::optional<Sample> {
        b.fill_sources(run, latency_bytes, devices);
        std::memset(host.data(), poison_byte, devices.size() * latency_bytes);
        Sample s;
        s.seconds = host_seconds([&] {
          for (std::size_t k = 0; k < devices.size(); ++k) {
            DeviceGuard guard(b.ordinal(devices[k]));
            cuda_check(cudaMemcpyAsync(host.data() + k * latency_bytes, b.src(devices[k]), latency_bytes,
                                       cudaMemcpyDeviceToHost, b.stream(devices[k])),
                       "cudaMemcpyAsync D2H");
            cuda_check(cudaEventRecord(b.done_event(devices[k]), b.stream(devices[k])), "cudaEventRecord");
          }
          for (const std::size_t d : devices)
            cuda_check(cudaEventSynchronize(b.done_event(d)), "cudaEventSynchronize");
        });
        for (std::size_t k = 0; k < devices.size(); ++k) {
          s.wrong +=
              b.check_host(host.subspan(k * latency_bytes, latency_bytes), Bench::seed(run, devices[k]));
        }
        return s;
      },
      latency_iters);
}

std::optional<Stats> latency_one(Bench& b, std::size_t) { return latency(b, {0}); }
std::optional<Stats> latency_all(Bench& b, std::size_t) { return latency(b, b.all_devices()); }

}  // namespace

std::vector<OpSpec> ceiling_ops() {
  const std::string all = "size x devices";
  const std::string payload = "size";
  return {
      {.name = "ceiling_d2h",
       .kind = Kind::ceiling,
       .what = "raw cudaMemcpyAsync D2H into pinned memory, every device at once (events, spin gate)",
       .bytes_rule = all,
       .bytes = bytes_all_devices,
       .run = ceiling_d2h},
      {.name = "ceiling_d2h_one",
       .kind = Kind::ceiling,
       .what = "raw cudaMemcpyAsync D2H into pinned memory, device 0 alone (events, spin gate)",
       .bytes_rule = payload,
       .bytes = bytes_payload,
       .run = ceiling_d2h_one},
      {.name = "ceiling_h2d",
       .kind = Kind::ceiling,
       .what = "raw cudaMemcpyAsync H2D from pinned memory, every device at once (events, spin gate)",
       .bytes_rule = all,
       .bytes = bytes_all_devices,
       .run = ceiling_h2d},
      {.name = "ceiling_h2d_one",
       .kind = Kind::ceiling,
       .what =
           "raw cudaMemcpyAsync H2D from pinned memory, the last device alone: one link (events, spin gate)",
       .bytes_rule = payload,
       .bytes = bytes_payload,
       .run = ceiling_h2d_one},
      {.name = "ceiling_peer",
       .kind = Kind::ceiling,
       .what = "raw cudaMemcpyPeerAsync device 0 -> 1, peer access on (events, spin gate)",
       .bytes_rule = payload,
       .bytes = bytes_payload,
       .waive = needs_peer_access,
       .run = ceiling_peer},
      {.name = "ceiling_to_device",
       .kind = Kind::ceiling,
       .what = "raw cudaMemcpyPeerAsync of every device's buffer into device 0, each on its own stream",
       .bytes_rule = all,
       .bytes = bytes_all_devices,
       .run = ceiling_to_device},
      {.name = "ceiling_nccl_bcast",
       .kind = Kind::ceiling,
       .what = "raw ncclBroadcast from device 0 over every device, communicators from ncclCommInitAll, warm",
       .bytes_rule = payload,
       .bytes = bytes_payload,
       .waive = needs_nccl,
       .run = ceiling_nccl_bcast},
      {.name = "ceiling_host_memcpy_t1",
       .kind = Kind::ceiling,
       .what = "host memcpy pageable -> pinned, 1 thread (steady_clock)",
       .bytes_rule = all,
       .bytes = bytes_all_devices,
       .run = ceiling_host_memcpy<1>},
      {.name = "ceiling_host_memcpy_t8",
       .kind = Kind::ceiling,
       .what = "host memcpy pageable -> pinned, 8 threads (steady_clock)",
       .bytes_rule = all,
       .bytes = bytes_all_devices,
       .run = ceiling_host_memcpy<8>},
      {.name = "ceiling_host_memcpy_t16",
       .kind = Kind::ceiling,
       .what = "host memcpy pageable -> pinned, 16 threads (steady_clock)",
       .bytes_rule = all,
       .bytes = bytes_all_devices,
       .run = ceiling_host_memcpy<16>},
      {.name = "latency_4k_one",
       .kind = Kind::ceiling,
       .what = "one 4 KiB cudaMemcpyAsync D2H + event wait, device 0 (steady_clock)",
       .bytes_rule = payload,
       .bytes = bytes_payload,
       .fixed_size = latency_bytes,
       .run = latency_one},
      {.name = "latency_4k",
       .kind = Kind::ceiling,
       .what = "one 4 KiB cudaMemcpyAsync D2H + event per device, wait for all (steady_clock)",
       .bytes_rule = all,
       .bytes = bytes_all_devices,
       .fixed_size = latency_bytes,
       .run = latency_all},
  };
}

}  // namespace gpuxfer::bench
