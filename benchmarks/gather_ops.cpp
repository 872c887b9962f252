// Gathers: every device's buffer to pinned results (gather_all), into caller pageable memory
// (gather_into), into device 0's memory (gather_to_device), the seed's naive way, and the 4 KiB latency.
#include <cstring>

#include <nvtx3/nvtx3.hpp>

#include "ops.hpp"

namespace gpuxfer::bench {
namespace {

constexpr std::size_t latency_bytes = 4096;
constexpr int latency_iters = 50;

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

std::optional<Stats> gather_at(Bench& b, std::size_t size, int min_iters) {
  return b.measure(
      [&](std::uint64_t run) -> std::optional<Sample> {
        prepare_sources(b, run, size);
        std::vector<HostBuffer> results;
        Sample s;
        s.seconds = host_seconds([&] { results = b.xfer().gather_all(); });
        s.wrong = check_results(b, results, run, size);
        // The blocks go back to the pool poisoned: a later gather that fails to write them is caught.
        for (HostBuffer& r : results) parallel_poison(b.threads(), r.span());
        return s;
      },
      min_iters);
}

std::optional<Stats> gather(Bench& b, std::size_t size) { return gather_at(b, size, 0); }
std::optional<Stats> latency_gather_4k(Bench& b, std::size_t) {
  return gather_at(b, latency_bytes, latency_iters);
}

std::optional<Stats> gather_pageable(Bench& b, std::size_t size) {
  const std::span<std::byte> out = b.host_pageable().first(b.devices() * size);
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    prepare_sources(b, run, size);
    parallel_poison(b.threads(), out);
    std::vector<GatherPiece> pieces;
    Sample s;
    s.seconds = host_seconds([&] { pieces = b.xfer().gather_into(out); });
    s.wrong = pieces.size() == b.devices() ? 0 : out.size();
    for (const GatherPiece& p : pieces) {
      s.wrong += p.size == size && p.offset + size <= out.size()
                     ? b.check_host(out.subspan(p.offset, size), Bench::seed(run, p.device))
                     : size;
    }
    return s;
  });
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
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    b.fill_sources(run, size, b.all_devices());
    std::vector<std::vector<std::byte>> results;
    Sample s;
    s.seconds = host_seconds([&] { results = naive_gather_once(b, size); });
    s.wrong = check_results(b, results, run, size);
    return s;
  });
}

std::optional<Stats> gather_to_device(Bench& b, std::size_t size) {
  const std::size_t capacity = b.devices() * size;
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    prepare_sources(b, run, size);
    b.poison_device(0, b.gathered(), capacity);
    b.synchronize();
    std::vector<GatherPiece> pieces;
    Sample s;
    s.seconds = host_seconds([&] { pieces = b.xfer().gather_to_device(0, b.gathered(), capacity); });
    s.wrong = pieces.size() == b.devices() ? 0 : capacity;
    for (const GatherPiece& p : pieces) {
      s.wrong += p.size == size && p.offset + size <= capacity
                     ? b.check_device(0, b.gathered() + p.offset, size, Bench::seed(run, p.device))
                     : size;
    }
    return s;
  });
}

}  // namespace

std::vector<OpSpec> gather_ops() {
  const std::string all = "size x devices (total bytes moved)";
  return {
      {.name = "gather",
       .kind = Kind::gpuxfer,
       .what = "gather_all(): every device's buffer into pooled pinned HostBuffers (steady_clock)",
       .bytes_rule = all,
       .bytes = bytes_all_devices,
       .ceiling = {"ceiling_d2h"},
       .run = gather,
       .target = 0.95},
      {.name = "gather_pageable",
       .kind = Kind::gpuxfer,
       .what = "gather_into(std::vector): every device's buffer into caller pageable memory (steady_clock)",
       .bytes_rule = all,
       .bytes = bytes_all_devices,
       .ceiling = {"ceiling_d2h"},
       .bound = "ceiling_host_memcpy_t16",
       .run = gather_pageable,
       .target = 0.80},
      {.name = "naive_gather",
       .kind = Kind::naive,
       .what = "the seed's way: fresh cudaHostAlloc staging per call and device, wait device by device, "
               "copy into new std::vectors, cudaFreeHost (steady_clock)",
       .bytes_rule = all,
       .bytes = bytes_all_devices,
       .ceiling = {"ceiling_d2h"},
       .run = naive_gather},
      {.name = "gather_to_device",
       .kind = Kind::gpuxfer,
       .what = "gather_to_device(0): every device's buffer concatenated in device 0's memory (steady_clock)",
       .bytes_rule = all,
       .bytes = bytes_all_devices,
       .ceiling = {"ceiling_to_device"},
       .run = gather_to_device},
      {.name = "latency_gather_4k",
       .kind = Kind::gpuxfer,
       .what = "gather_all() of 4 KiB per device: latency against one raw 4 KiB copy + event per device",
       .bytes_rule = all,
       .bytes = bytes_all_devices,
       .ceiling = {"latency_4k"},
       .fixed_size = latency_bytes,
       .run = latency_gather_4k,
       .target = 1.0 / 1.3,
       .time_target = true},
  };
}

}  // namespace gpuxfer::bench
