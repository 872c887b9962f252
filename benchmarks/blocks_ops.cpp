// Block copies (the KV-cache offload and load of LLM serving): count blocks of one size between device
// memory and pinned host memory, each to its own slot, by index pairs in sequential or random order, both
// directions. copy_blocks against, in the same run, the ways callers do it today: one cudaMemcpyAsync
// per block, and one cudaMemcpyBatchAsync of every block; against the fastest raw use of the copy
// engines for scattered blocks, that batch cut into 8 parts on 8 streams as copy_blocks cuts it (the
// difference is copy_blocks' own cost); and against the link itself (one copy of all the bytes: one DMA,
// or device -> host the SMs' stores where a host takes those sooner), interleaved sample by sample with
// the rows with a target and the 8-stream batch. Every sample is checked block by block against a copy of the
// source made by one plain copy.
#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>

#include <gpuxfer/block_copy.hpp>

#include "host_threads.hpp"
#include "ops.hpp"
#include "ops/block_plan.hpp"
#include "raw_copies.hpp"

namespace gpuxfer::bench {
namespace {

constexpr std::array<std::size_t, 3> block_sizes{std::size_t{4} << 10, std::size_t{64} << 10,
                                                 std::size_t{1} << 20};

// Blocks per call at @p block_bytes: 64 MiB of them, at least 1024 and at most 16384.
std::size_t block_count(std::size_t block_bytes) {
  return std::clamp<std::size_t>((std::size_t{64} << 20) / block_bytes, 1024, 16384);
}

std::string size_name(std::size_t bytes) {
  return bytes >= (std::size_t{1} << 20) ? std::to_string(bytes >> 20) + "m"
                                         : std::to_string(bytes >> 10) + "k";
}

// The regions of one block size, shared by every operation of that size and kept for the run (pinned
// memory costs ~150 ms per 256 MiB to allocate): the device region, the host region, and the host mirror that checks.
struct Regions {
  std::size_t block_bytes;
  std::size_t count;
  DeviceMemory device;
  PinnedMemory host;
  PinnedMemory mirror;
  // Device -> host, whether the link is the SMs' stores rather than one DMA: chosen once, on the first
  // link sample of this size, so that every row of the size is set against the same link.
  std::optional<bool> d2h_link_by_stores;
  Regions(Bench& b, std::size_t bytes)
      : block_bytes(bytes),
        count(block_count(bytes)),
        device(b.ordinal(0), count * bytes),
        host(count * bytes),
        mirror(count * bytes) {}
  [[nodiscard]] std::size_t payload() const noexcept { return count * block_bytes; }
};

std::shared_ptr<Regions> regions_for(Bench& b, std::size_t block_bytes) {
  static std::mutex mutex;
  static std::map<std::size_t, std::shared_ptr<Regions>> cache;  // kept for the run: allocated once
  const std::lock_guard lock(mutex);
  std::shared_ptr<Regions>& r = cache[block_bytes];
  if (!r) r = std::make_shared<Regions>(b, block_bytes);
  return r;
}

enum class Method { link, loop, batch, split, gpuxfer };

// The streams Method::split cuts its batch over (the caller's and side streams).
constexpr std::size_t split_streams = 8;

// One operation: a direction, an order and a method over the regions of one block size.
class BlockBench {
 public:
  BlockBench(Bench& b, std::size_t block_bytes, bool to_host, bool random)
      : b_(b), r_(regions_for(b, block_bytes)), to_host_(to_host) {
    std::vector<std::int64_t> src(r_->count), dst(r_->count);
    std::iota(src.begin(), src.end(), 0);
    std::iota(dst.begin(), dst.end(), 0);
    if (random) {
      std::mt19937_64 rng(block_bytes * 7 + (to_host ? 1 : 2));
      std::shuffle(src.begin(), src.end(), rng);
      std::shuffle(dst.begin(), dst.end(), rng);
    }
    for (std::size_t k = 0; k < r_->count; ++k) pairs_.insert(pairs_.end(), {src[k], dst[k]});
    std::byte* from = to_host_ ? r_->device.get() : r_->host.data();
    std::byte* to = to_host_ ? r_->host.data() : r_->device.get();
    for (std::size_t k = 0; k < r_->count; ++k) {
      srcs_.push_back(from + src[k] * r_->block_bytes);
      dsts_.push_back(to + dst[k] * r_->block_bytes);
    }
    sizes_.assign(r_->count, r_->block_bytes);
  }

  // Source: the pattern of @p run, written by a kernel on the device and, for host -> device, copied to
  // the host by DMA as an offload writes it (not by the CPU, whose writes would leave it in the CPU's
  // caches); mirrored on the host for the check; destination poisoned (host memory: then evicted from
  // the CPU's caches, as every host buffer the bench times).
  void prepare(std::uint64_t run) {
    const std::size_t n = r_->payload();
    b_.fill_device(0, r_->device.get(), n, Bench::seed(run, 0));
    b_.synchronize();
    cuda_check(cudaMemcpy(r_->mirror.data(), r_->device.get(), n, cudaMemcpyDeviceToHost), "cudaMemcpy");
    if (!to_host_)
      cuda_check(cudaMemcpy(r_->host.data(), r_->device.get(), n, cudaMemcpyDeviceToHost), "cudaMemcpy");
    poison_destination();
  }

  // Bytes of destination blocks that differ from their source blocks.
  [[nodiscard]] std::size_t check(std::uint64_t /*run*/) {
    const std::size_t n = r_->payload();
    const std::byte* src_side = r_->mirror.data();  // the source as it was
    const std::byte* dst_side = r_->host.data();
    if (!to_host_) {  // the device's blocks come back through one plain copy over the host source
      cuda_check(cudaMemcpy(r_->host.data(), r_->device.get(), n, cudaMemcpyDeviceToHost), "cudaMemcpy");
    }  // (the next prepare writes the source again)
    std::size_t wrong = 0;
    const std::size_t bb = r_->block_bytes;
    for (std::size_t k = 0; k < r_->count; ++k) {
      const std::byte* want = src_side + pairs_[2 * k] * bb;
      const std::byte* got = dst_side + pairs_[2 * k + 1] * bb;
      if (std::memcmp(want, got, bb) != 0) {
        for (std::size_t i = 0; i < bb; ++i) wrong += want[i] != got[i];
      }
    }
    return wrong;
  }

  void work(Method m) {
    const cudaStream_t s = b_.stream(0);
    switch (m) {
      case Method::link:
        if (to_host_ && !r_->d2h_link_by_stores) {
          r_->d2h_link_by_stores = stores_beat_dma(s);
          poison_destination();  // the trials wrote it: this sample's check must see its own copy
        }
        queue_link(to_host_ && *r_->d2h_link_by_stores, s);
        break;
      case Method::loop:
        for (std::size_t k = 0; k < r_->count; ++k) {
          cuda_check(cudaMemcpyAsync(dsts_[k], srcs_[k], r_->block_bytes, cudaMemcpyDefault, s),
                     "cudaMemcpyAsync");
        }
        break;
      case Method::batch:
        batch(0, r_->count, s);
        break;
      case Method::split:
        split(s);
        break;
      case Method::gpuxfer: {
        const BlockLayout device{r_->device.get(), r_->count};
        const BlockLayout host{r_->host.data(), r_->count};
        BlockCopy c{
            to_host_ ? device : host, to_host_ ? host : device, pairs_.data(), r_->count, r_->block_bytes, 1};
        c.path = path_;
        (void)copy_blocks_async(c, s);
        break;
      }
    }
    cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }

  void set_path(BlockPath p) { path_ = p; }

 private:
  // The destination region poisoned (host memory: then evicted from the CPU's caches, as every host
  // buffer the bench times) and waited for.
  void poison_destination() {
    const std::size_t n = r_->payload();
    if (to_host_) {
      parallel_poison(b_.threads(), {r_->host.data(), n});  // evicted: a DMA into dirty lines waits
    } else {
      b_.poison_device(0, r_->device.get(), n);
      b_.synchronize();
    }
  }

  // One copy of all the bytes (@p by_stores: the SMs' stores into host memory, copy_blocks' kernel over
  // the blocks in order; else one cudaMemcpyAsync) on @p s.
  void queue_link(bool by_stores, cudaStream_t s) {
    if (by_stores) {
      BlockCopy c{{r_->device.get(), r_->count},
                  {r_->host.data(), r_->count},
                  pairs_.data(),
                  r_->count,
                  r_->block_bytes,
                  1};
      c.path = BlockPath::kernel;
      (void)copy_blocks_async(c, s);
      return;
    }
    cuda_check(
        cudaMemcpyAsync(to_host_ ? r_->host.data() : r_->device.get(),
                        to_host_ ? r_->device.get() : r_->host.data(), r_->payload(), cudaMemcpyDefault, s),
        "cudaMemcpyAsync");
  }

  // Whether the SMs' stores move all the bytes to the host sooner than one DMA (fastest of 3 each): on
  // some hosts they do for regions of a GiB, and a link that copy_blocks' kernel path beats is no ceiling.
  bool stores_beat_dma(cudaStream_t s) {
    const auto fastest = [&](bool by_stores) {
      double best = 1e30;
      for (int k = 0; k < 3; ++k) {
        best = std::min(best, host_seconds([&] {
                          queue_link(by_stores, s);
                          cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
                        }));
      }
      return best;
    };
    return fastest(true) < fastest(false);
  }

  // One cudaMemcpyBatchAsync of blocks [lo, hi) on @p s.
  void batch(std::size_t lo, std::size_t hi, cudaStream_t s) {
    cudaMemcpyAttributes attrs{};
    attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    std::size_t attrs_index = 0;
    cuda_check(cudaMemcpyBatchAsync(dsts_.data() + lo, srcs_.data() + lo, sizes_.data() + lo, hi - lo, &attrs,
                                    &attrs_index, 1, s),
               "cudaMemcpyBatchAsync");
  }

  // The blocks in split_streams parts cut as copy_blocks cuts them (detail::batch_cut): the first on @p s,
  // the others on side streams that wait for @p s and that @p s waits for after them.
  void split(cudaStream_t s) {
    const int ordinal = b_.ordinal(0);
    while (side_.size() + 1 < split_streams) side_.emplace_back(ordinal);
    while (events_.size() < split_streams) events_.emplace_back(ordinal, false);
    cuda_check(cudaEventRecord(events_[0].get(), s), "cudaEventRecord");
    for (std::size_t j = 1; j < split_streams; ++j)
      cuda_check(cudaStreamWaitEvent(side_[j - 1].get(), events_[0].get()), "cudaStreamWaitEvent");
    for (std::size_t j = 0; j < split_streams; ++j) {
      batch(detail::batch_cut(r_->count, split_streams, j),
            detail::batch_cut(r_->count, split_streams, j + 1), j == 0 ? s : side_[j - 1].get());
    }
    for (std::size_t j = 1; j < split_streams; ++j) {
      cuda_check(cudaEventRecord(events_[j].get(), side_[j - 1].get()), "cudaEventRecord");
      cuda_check(cudaStreamWaitEvent(s, events_[j].get()), "cudaStreamWaitEvent");
    }
  }

  Bench& b_;
  std::shared_ptr<Regions> r_;
  bool to_host_;
  std::vector<std::int64_t> pairs_;
  std::vector<void*> dsts_;
  std::vector<const void*> srcs_;
  std::vector<std::size_t> sizes_;
  std::vector<Stream> side_;  // Method::split's, made on its first sample
  std::vector<Event> events_;
  BlockPath path_ = BlockPath::automatic;
};

std::size_t blocks_bytes(std::size_t size, std::size_t /*devices*/) { return size * block_count(size); }

OpSpec block_op(std::size_t block_bytes, bool to_host, bool random, Method m,
                BlockPath path = BlockPath::automatic) {
  const std::string dir = to_host ? "d2h" : "h2d";
  const std::string order = random ? "random" : "seq";
  const std::string link = "blocks_link_" + dir + "_" + size_name(block_bytes);
  std::string name;
  std::string what;
  Kind kind = Kind::baseline;
  switch (m) {
    case Method::link:
      name = link;
      kind = Kind::ceiling;
      what =
          "one cudaMemcpyAsync of all the blocks' bytes (pinned host), or, device -> host, the SMs' "
          "stores of them in order (copy_blocks' kernel) where those are faster on this host: the link";
      break;
    case Method::loop:
      name = "blocks_" + dir + "_" + order + "_" + size_name(block_bytes) + "_loop";
      what = "one cudaMemcpyAsync per block";
      break;
    case Method::batch:
      name = "blocks_" + dir + "_" + order + "_" + size_name(block_bytes) + "_batch";
      what = "one cudaMemcpyBatchAsync of every block";
      break;
    case Method::split:
      name = "blocks_" + dir + "_" + order + "_" + size_name(block_bytes) + "_batch8";
      what = "one cudaMemcpyBatchAsync of every block cut into " + std::to_string(split_streams) +
             " parts on as many streams as copy_blocks cuts it (forked and joined by events)";
      break;
    case Method::gpuxfer:
      name = "blocks_" + dir + "_" + order + "_" + size_name(block_bytes) +
             (path == BlockPath::automatic ? std::string() : std::string("_") + to_string(path));
      kind = Kind::gpuxfer;
      what = std::string("copy_blocks_async, path ") + to_string(path);
      break;
  }
  what +=
      ", " + std::to_string(block_count(block_bytes)) + " blocks, " + order + " pairs, then a stream sync";
  std::optional<double> target;
  if (m == Method::gpuxfer && path == BlockPath::automatic && block_bytes >= (std::size_t{64} << 10))
    target = 0.90;
  return {.name = name,
          .kind = kind,
          .what = what,
          .bytes = {"blocks x block size", blocks_bytes},
          .ceiling = m == Method::link ? std::vector<std::string>{} : std::vector<std::string>{link},
          .fixed_size = block_bytes,
          .run =
              [block_bytes, to_host, random, m, path, target](Bench& b, std::size_t) {
                const auto case_of = [](const std::shared_ptr<BlockBench>& g, Method how) {
                  return Case{.prepare = [g](std::uint64_t run) { g->prepare(run); },
                              .work = [g, how] { g->work(how); },
                              .check = [g](std::uint64_t run) { return g->check(run); }};
                };
                auto g = std::make_shared<BlockBench>(b, block_bytes, to_host, random);
                g->set_path(path);
                if (!target && m != Method::split) return b.measure(case_of(g, m));
                // A row with a target, and the 8-stream batch it is set against, run interleaved with the
                // link, their ceiling, sample by sample.
                auto link = std::make_shared<BlockBench>(b, block_bytes, to_host, false);
                return measure_against(b, case_of(link, Method::link), case_of(g, m));
              },
          .target = target};
}

}  // namespace

std::vector<OpSpec> block_ops() {
  std::vector<OpSpec> ops;
  for (const std::size_t bb : block_sizes) {
    for (const bool to_host : {true, false}) {
      ops.push_back(block_op(bb, to_host, false, Method::link));
      for (const bool random : {false, true}) {
        ops.push_back(block_op(bb, to_host, random, Method::loop));
        ops.push_back(block_op(bb, to_host, random, Method::batch));
        ops.push_back(block_op(bb, to_host, random, Method::split));
        ops.push_back(block_op(bb, to_host, random, Method::gpuxfer));
        ops.push_back(block_op(bb, to_host, random, Method::gpuxfer, BlockPath::kernel));
        ops.push_back(block_op(bb, to_host, random, Method::gpuxfer, BlockPath::copy_engine));
      }
    }
  }
  return ops;
}

}  // namespace gpuxfer::bench
