// Many small buffers per device (1000 x 4 KiB): what a batched gather must beat. The pieces sit 8 KiB
// apart in one arena per device, so no two are contiguous and no copy can cover two of them. Each timed
// call follows an untimed one of the same kind into a second output (Case::warm), as in a caller's loop.
#include <array>
#include <memory>
#include <vector>

#include "host_threads.hpp"
#include "memory/streaming_copy.hpp"

#include "ops.hpp"
#include "raw_copies.hpp"

namespace gpuxfer::bench {
namespace {

constexpr std::size_t count = 1000;   // pieces per device
constexpr std::size_t piece = 4096;   // bytes per piece
constexpr std::size_t stride = 8192;  // bytes from one piece's start to the next in the arena

// The arenas, the outputs (the checked one and the warm-up's), and the three ways of moving every piece
// of every device into an output.
class SmallGather {
 public:
  explicit SmallGather(Bench& b)
      : b_(b),
        outs_{PinnedMemory(b.devices() * count * piece), PinnedMemory(b.devices() * count * piece)},
        poison_(outs_[0].size(), std::byte{poison_byte}),
        srcs_(b.devices()),
        sizes_(count, piece) {
    for (std::size_t d = 0; d < b.devices(); ++d) arenas_.emplace_back(b.ordinal(d), count * stride);
    for (std::size_t o = 0; o < outs_.size(); ++o) dsts_[o].resize(b.devices());
    for (std::size_t d = 0; d < b.devices(); ++d) {
      for (std::size_t k = 0; k < count; ++k) {
        for (std::size_t o = 0; o < outs_.size(); ++o) {
          copies_[o].push_back({{source(d, k), d}, {target(o, d, k)}, piece, d, d});
          dsts_[o][d].push_back(target(o, d, k));
        }
        slices_.push_back({d, source(d, k), piece});
        srcs_[d].push_back(source(d, k));
      }
    }
  }

  // @p work into the warm-up's output, untimed.
  void warm(void (SmallGather::*work)()) {
    into_ = 1;
    (this->*work)();
    into_ = 0;
  }

  // Every arena filled with its device's pattern for @p run, the output poisoned with streaming stores,
  // waited for. A memset poison would leave the 4 MB output dirty in the CPUs' caches, and every DMA write
  // would then wait for a write-back that only the bench's poisoning made: on the runner gather_slices
  // took 272-301 us after a memset poison, 118-128 us after this one (the baseline 1.9-2.1 ms after either).
  void prepare(std::uint64_t run) {
    for (std::size_t d = 0; d < b_.devices(); ++d) {
      b_.fill_device(d, arenas_[d].get(), arenas_[d].size(), Bench::seed(run, d));
    }
    // One thread: split over the bench's threads, each part would fall under streaming_min_bytes, which
    // copy_streaming leaves to libc's ordinary stores.
    detail::copy_streaming(outs_[0].data(), poison_.data(), poison_.size());
    b_.synchronize();
  }

  // Bytes of the output that differ from what the pieces of run @p run hold; all of them when
  // gather_slices said it wrote less.
  [[nodiscard]] std::size_t check(std::uint64_t run) {
    std::size_t wrong = unwritten_;
    for (std::size_t d = 0; d < b_.devices(); ++d) {
      for (std::size_t k = 0; k < count; ++k) {
        wrong += b_.check_host({target(0, d, k), piece}, Bench::seed(run, d), k * stride);
      }
    }
    return wrong;
  }

  // One cudaMemcpyAsync per piece, each device on its own stream, an event per device, wait for all.
  void one_copy_each() {
    enqueue_copies(b_, copies_[into_], true);
    b_.wait_done(b_.all_devices());
  }

  // One cudaMemcpyBatchAsync of every piece per device: the best the runtime offers without packing.
  void one_batch_each() {
    for (std::size_t d = 0; d < b_.devices(); ++d) {
      DeviceGuard guard(b_.ordinal(d));
      cudaMemcpyAttributes attrs{};
      attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      std::size_t attrs_index = 0;
      cuda_check(cudaMemcpyBatchAsync(dsts_[into_][d].data(), srcs_[d].data(), sizes_.data(), count, &attrs,
                                      &attrs_index, 1, b_.stream(d)),
                 "cudaMemcpyBatchAsync");
      cuda_check(cudaEventRecord(b_.done_event(d), b_.stream(d)), "cudaEventRecord");
    }
    b_.wait_done(b_.all_devices());
  }

  // gpuxfer: one blocking gather_slices call; the slices are built beforehand (a caller holds its list).
  void gather_slices() {
    const std::size_t written = b_.xfer().gather_slices(slices_, outs_[into_].span());
    if (into_ == 0) unwritten_ = written == outs_[0].size() ? 0 : outs_[0].size();
  }

 private:
  [[nodiscard]] std::byte* source(std::size_t d, std::size_t k) const noexcept {
    return arenas_[d].get() + k * stride;
  }
  // In output @p o: device-major, then piece order.
  [[nodiscard]] std::byte* target(std::size_t o, std::size_t d, std::size_t k) const noexcept {
    return outs_[o].data() + (d * count + k) * piece;
  }

  Bench& b_;
  std::vector<DeviceMemory> arenas_;
  std::array<PinnedMemory, 2> outs_;                     // the checked output, the warm-up's
  std::vector<std::byte> poison_;                        // copied over the checked output before each call
  std::array<std::vector<RawCopy>, 2> copies_;           // per output, one per piece: the baseline
  std::vector<DeviceSlice> slices_;                      // one per piece: gather_slices
  std::array<std::vector<std::vector<void*>>, 2> dsts_;  // per output, device, piece: cudaMemcpyBatchAsync
  std::vector<std::vector<const void*>> srcs_;
  std::vector<std::size_t> sizes_;
  std::size_t into_ = 0;  // the output the work writes: 0 is checked, 1 is the warm-up's
  std::size_t unwritten_ = 0;
};

constexpr std::size_t all_pieces_bytes(std::size_t /*size*/, std::size_t devices) {
  return devices * count * piece;
}

// Rounds of the measurement against the baseline, and samples of each per round: the two interleaved
// sample by sample, the least disturbed round kept, as the 4 KiB latency is. Measured apart in one run of the
// short bench, gather_slices' five samples spread from 144 to 404 us (median 293) where alone in its own
// process it gave 118-128 us.
constexpr int small_rounds = 4;
constexpr int small_per_round = 5;

// One way of moving the pieces (a member of SmallGather), measured over a fresh set of arenas; unless it
// is the baseline (one copy per piece), interleaved with it.
OpSpec small_op(const char* name, Kind kind, std::string what, void (SmallGather::*work)(),
                std::optional<double> target) {
  const bool baseline = work == &SmallGather::one_copy_each;
  return {
      .name = name,
      .kind = kind,
      .what = std::move(what),
      .bytes = {"devices x 1000 x 4 KiB", all_pieces_bytes},
      .ceiling = baseline ? std::vector<std::string>{} : std::vector<std::string>{"small_gather_baseline"},
      .fixed_size = piece,
      .run =
          [work, baseline](Bench& b, std::size_t) {
            auto g = std::make_shared<SmallGather>(b);
            const auto case_of = [g](void (SmallGather::*w)()) {
              return Case{.prepare = [g](std::uint64_t run) { g->prepare(run); },
                          .work = [g, w] { ((*g).*w)(); },
                          .check = [g](std::uint64_t run) { return g->check(run); },
                          .warm = [g, w] { g->warm(w); }};
            };
            if (baseline) return b.measure(case_of(work));
            return b.measure_interleaved(case_of(&SmallGather::one_copy_each), case_of(work), small_rounds,
                                         small_per_round);
          },
      .target = target};
}

}  // namespace

std::vector<OpSpec> small_gather_ops() {
  return {
      small_op("small_gather_baseline", Kind::baseline,
               "1000 x 4 KiB pieces per device to pinned memory, one cudaMemcpyAsync each (steady_clock)",
               &SmallGather::one_copy_each, std::nullopt),
      small_op("small_gather_batch", Kind::baseline,
               "the same with one cudaMemcpyBatchAsync per device; ratio = speedup over the baseline",
               &SmallGather::one_batch_each, std::nullopt),
      small_op(
          "small_gather", Kind::gpuxfer,
          "gather_slices() of the same pieces into the same pinned output; ratio = speedup over the baseline",
          &SmallGather::gather_slices, 10.0),
  };
}

}  // namespace gpuxfer::bench
