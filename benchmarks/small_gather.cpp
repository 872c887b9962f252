// Many small buffers per device (1000 x 4 KiB): what a batched gather must beat. The pieces sit 8 KiB
// apart in one arena per device, so no two are contiguous and no copy can cover two of them.
#include <memory>

#include "ops.hpp"
#include "raw_copies.hpp"

namespace gpuxfer::bench {
namespace {

constexpr std::size_t count = 1000;   // pieces per device
constexpr std::size_t piece = 4096;   // bytes per piece
constexpr std::size_t stride = 8192;  // bytes from one piece's start to the next in the arena

// The arenas, the output, and the three ways of moving every piece of every device into the output.
class SmallGather {
 public:
  explicit SmallGather(Bench& b)
      : b_(b),
        out_(b.devices() * count * piece),
        dsts_(b.devices()),
        srcs_(b.devices()),
        sizes_(count, piece) {
    for (std::size_t d = 0; d < b.devices(); ++d) arenas_.emplace_back(b.ordinal(d), count * stride);
    for (std::size_t d = 0; d < b.devices(); ++d) {
      for (std::size_t k = 0; k < count; ++k) {
        copies_.push_back({{source(d, k), d}, {target(d, k)}, piece, d, d});
        slices_.push_back({d, source(d, k), piece});
        dsts_[d].push_back(target(d, k));
        srcs_[d].push_back(source(d, k));
      }
    }
  }

  // Every arena filled with its device's pattern for @p run, the output poisoned, waited for.
  void prepare(std::uint64_t run) {
    for (std::size_t d = 0; d < b_.devices(); ++d) {
      b_.fill_device(d, arenas_[d].get(), arenas_[d].size(), Bench::seed(run, d));
    }
    parallel_poison(b_.threads(), out_.span());
    b_.synchronize();
  }

  // Bytes of the output that differ from what the pieces of run @p run hold; all of them when
  // gather_slices said it wrote less.
  [[nodiscard]] std::size_t check(std::uint64_t run) {
    std::size_t wrong = unwritten_;
    for (std::size_t d = 0; d < b_.devices(); ++d) {
      for (std::size_t k = 0; k < count; ++k) {
        wrong += b_.check_host({target(d, k), piece}, Bench::seed(run, d), k * stride);
      }
    }
    return wrong;
  }

  // One cudaMemcpyAsync per piece, each device on its own stream, an event per device, wait for all.
  void one_copy_each() {
    enqueue_copies(b_, copies_, true);
    b_.wait_done(b_.all_devices());
  }

  // One cudaMemcpyBatchAsync of every piece per device: the best the runtime offers without packing.
  void one_batch_each() {
    for (std::size_t d = 0; d < b_.devices(); ++d) {
      DeviceGuard guard(b_.ordinal(d));
      cudaMemcpyAttributes attrs{};
      attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      std::size_t attrs_index = 0;
      cuda_check(cudaMemcpyBatchAsync(dsts_[d].data(), srcs_[d].data(), sizes_.data(), count, &attrs,
                                      &attrs_index, 1, b_.stream(d)),
                 "cudaMemcpyBatchAsync");
      cuda_check(cudaEventRecord(b_.done_event(d), b_.stream(d)), "cudaEventRecord");
    }
    b_.wait_done(b_.all_devices());
  }

  // gpuxfer: one blocking gather_slices call; the slices are built beforehand (a caller holds its list).
  void gather_slices() {
    const std::size_t written = b_.xfer().gather_slices(slices_, out_.span());
    unwritten_ = written == out_.size() ? 0 : out_.size();
  }

 private:
  [[nodiscard]] std::byte* source(std::size_t d, std::size_t k) const noexcept {
    return arenas_[d].get() + k * stride;
  }
  // Device-major, then piece order.
  [[nodiscard]] std::byte* target(std::size_t d, std::size_t k) const noexcept {
    return out_.data() + (d * count + k) * piece;
  }

  Bench& b_;
  std::vector<DeviceMemory> arenas_;
  PinnedMemory out_;
  std::vector<RawCopy> copies_;           // one per piece: the baseline
  std::vector<DeviceSlice> slices_;       // one per piece: gather_slices
  std::vector<std::vector<void*>> dsts_;  // per device, per piece: cudaMemcpyBatchAsync
  std::vector<std::vector<const void*>> srcs_;
  std::vector<std::size_t> sizes_;
  std::size_t unwritten_ = 0;
};

constexpr std::size_t all_pieces_bytes(std::size_t /*size*/, std::size_t devices) {
  return devices * count * piece;
}

// One way of moving the pieces (a member of SmallGather), measured over a fresh set of arenas; against
// the baseline (one copy per piece) unless it is the baseline.
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
          [work](Bench& b, std::size_t) {
            auto g = std::make_shared<SmallGather>(b);
            return b.measure({.prepare = [g](std::uint64_t run) { g->prepare(run); },
                              .work = [g, work] { ((*g).*work)(); },
                              .check = [g](std::uint64_t run) { return g->check(run); }});
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
          &SmallGather::gather_slices, 5.0),
  };
}

}  // namespace gpuxfer::bench
