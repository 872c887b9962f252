#include "small_gather.hpp"

#include "ops.hpp"

namespace gpuxfer::bench {

std::optional<Sample> run_small_gather_gpuxfer(Bench& b, SmallGatherSetup& setup, std::uint64_t run) {
  // Built before the clock starts: a caller holds its list of slices already.
  std::vector<DeviceSlice> slices;
  slices.reserve(b.devices() * SmallGatherSetup::count);
  for (std::size_t d = 0; d < b.devices(); ++d) {
    for (std::size_t k = 0; k < SmallGatherSetup::count; ++k) {
      slices.push_back({d, setup.source(d, k), SmallGatherSetup::piece});
    }
  }
  std::size_t written = 0;
  Sample s;
  s.seconds = host_seconds([&] { written = b.xfer().gather_slices(slices, setup.out.span()); });
  s.wrong = check_small_gather(b, setup, run);
  if (written != setup.out.size()) s.wrong += setup.out.size();
  return s;
}

SmallGatherSetup make_small_gather(Bench& b) {
  SmallGatherSetup setup;
  for (std::size_t d = 0; d < b.devices(); ++d) {
    setup.arenas.emplace_back(b.ordinal(d), SmallGatherSetup::count * SmallGatherSetup::stride);
  }
  setup.out = PinnedMemory(b.devices() * SmallGatherSetup::count * SmallGatherSetup::piece);
  return setup;
}

void prepare_small_gather(Bench& b, SmallGatherSetup& setup, std::uint64_t run) {
  for (std::size_t d = 0; d < b.devices(); ++d) {
    b.fill_device(d, setup.arenas[d].get(), setup.arenas[d].size(), Bench::seed(run, d));
  }
  parallel_poison(b.threads(), setup.out.span());
  b.synchronize();
}

std::size_t check_small_gather(Bench& b, const SmallGatherSetup& setup, std::uint64_t run) {
  std::size_t wrong = 0;
  for (std::size_t d = 0; d < b.devices(); ++d) {
    for (std::size_t k = 0; k < SmallGatherSetup::count; ++k) {
      const std::span<const std::byte> got(setup.target(d, k), SmallGatherSetup::piece);
      wrong += b.check_host(got, Bench::seed(run, d), k * SmallGatherSetup::stride);
    }
  }
  return wrong;
}

namespace {

constexpr std::size_t all_pieces_bytes(std::size_t /*size*/, std::size_t devices) {
  return devices * SmallGatherSetup::count * SmallGatherSetup::piece;
}

// One cudaMemcpyAsync per piece, each device on its own stream, an event per device, wait for all.
std::optional<Stats> small_gather_baseline(Bench& b, std::size_t) {
  SmallGatherSetup setup = make_small_gather(b);
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    prepare_small_gather(b, setup, run);
    Sample s;
    s.seconds = host_seconds([&] {
      for (std::size_t d = 0; d < b.devices(); ++d) {
        DeviceGuard guard(b.ordinal(d));
        for (std::size_t k = 0; k < SmallGatherSetup::count; ++k) {
          cuda_check(cudaMemcpyAsync(setup.target(d, k), setup.source(d, k), SmallGatherSetup::piece,
                                     cudaMemcpyDeviceToHost, b.stream(d)),
                     "cudaMemcpyAsync D2H");
        }
        cuda_check(cudaEventRecord(b.done_event(d), b.stream(d)), "cudaEventRecord");
      }
      for (std::size_t d = 0; d < b.devices(); ++d) {
        cuda_check(cudaEventSynchronize(b.done_event(d)), "cudaEventSynchronize");
      }
    });
    s.wrong = check_small_gather(b, setup, run);
    return s;
  });
}

// One cudaMemcpyBatchAsync of every piece per device: the best the runtime offers without packing.
std::optional<Stats> small_gather_batch(Bench& b, std::size_t) {
  SmallGatherSetup setup = make_small_gather(b);
  std::vector<std::vector<void*>> dsts(b.devices());
  std::vector<std::vector<const void*>> srcs(b.devices());
  for (std::size_t d = 0; d < b.devices(); ++d) {
    for (std::size_t k = 0; k < SmallGatherSetup::count; ++k) {
      dsts[d].push_back(setup.target(d, k));
      srcs[d].push_back(setup.source(d, k));
    }
  }
  const std::vector<std::size_t> sizes(SmallGatherSetup::count, SmallGatherSetup::piece);
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    prepare_small_gather(b, setup, run);
    Sample s;
    s.seconds = host_seconds([&] {
      for (std::size_t d = 0; d < b.devices(); ++d) {
        DeviceGuard guard(b.ordinal(d));
        cudaMemcpyAttributes attrs{};
        attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        std::size_t attrs_index = 0;
        cuda_check(cudaMemcpyBatchAsync(dsts[d].data(), srcs[d].data(), sizes.data(), SmallGatherSetup::count,
                                        &attrs, &attrs_index, 1, b.stream(d)),
                   "cudaMemcpyBatchAsync");
        cuda_check(cudaEventRecord(b.done_event(d), b.stream(d)), "cudaEventRecord");
      }
      for (std::size_t d = 0; d < b.devices(); ++d) {
        cuda_check(cudaEventSynchronize(b.done_event(d)), "cudaEventSynchronize");
      }
    });
    s.wrong = check_small_gather(b, setup, run);
    return s;
  });
}

std::optional<Stats> small_gather(Bench& b, std::size_t) {
  SmallGatherSetup setup = make_small_gather(b);
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    prepare_small_gather(b, setup, run);
    return run_small_gather_gpuxfer(b, setup, run);
  });
}

}  // namespace

std::vector<OpSpec> small_gather_ops() {
  const std::string rule = "devices x 1000 x 4 KiB";
  return {
      {.name = "small_gather_baseline",
       .kind = Kind::baseline,
       .what = "1000 x 4 KiB pieces per device to pinned memory, one cudaMemcpyAsync each (steady_clock)",
       .bytes_rule = rule,
       .bytes = all_pieces_bytes,
       .fixed_size = SmallGatherSetup::piece,
       .run = small_gather_baseline},
      {.name = "small_gather_batch",
       .kind = Kind::baseline,
       .what = "the same with one cudaMemcpyBatchAsync per device; ratio = speedup over the baseline",
       .bytes_rule = rule,
       .bytes = all_pieces_bytes,
       .ceiling = {"small_gather_baseline"},
       .fixed_size = SmallGatherSetup::piece,
       .run = small_gather_batch},
      {.name = "small_gather",
       .kind = Kind::gpuxfer,
       .what = "gather_slices() of the same pieces into the same pinned output; ratio = speedup over the "
               "baseline",
       .bytes_rule = rule,
       .bytes = all_pieces_bytes,
       .ceiling = {"small_gather_baseline"},
       .fixed_size = SmallGatherSetup::piece,
       .run = small_gather,
       .target = 5.0},
  };
}

}  // namespace gpuxfer::bench
