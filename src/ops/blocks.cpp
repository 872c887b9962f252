// copy_blocks: many fixed-size blocks between a device and host memory (or within one device), each at
// its own slot. The plan (ops/block_plan) checks and merges the pairs; this file finds each region's
// kind, picks the path and queues it on the caller's stream: the copies are ordered with the stream's
// earlier and later work as any work of the stream is, no staging, no thread. A batch of long rows is
// split over side streams of the calling thread, forked from the caller's stream and joined back to it
// by events, because the copy engines work on several copies at once only from several streams.
#include <gpuxfer/block_copy.hpp>
#include <gpuxfer/detail/device_guard.hpp>

#include <cstdio>
#include <map>
#include <memory>
#include <memory_resource>
#include <span>
#include <string>
#include <vector>

#include <nvtx3/nvtx3.hpp>

#include <gpuxfer/error.hpp>

#include "cuda/block_kernels.hpp"
#include "memory/host_memory.hpp"
#include "ops/block_plan.hpp"
#include "runtime/capture_mode.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/driver_api.hpp"
#include "runtime/event.hpp"
#include "runtime/stream.hpp"

namespace gpuxfer {
namespace {

// What a region's base points at.
struct Region {
  bool device = false;  // device memory (else host)
  bool pinned = false;  // host memory the driver knows as page-locked
  int ordinal = -1;     // the device, for device memory
};

std::string hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

Region classify(const void* ptr, const char* what) {
  cudaPointerAttributes attr{};
  const cudaError_t err = detail::handled(cudaPointerGetAttributes(&attr, ptr));
  if (err != cudaSuccess)
    GPUXFER_CUDA_TRY_CTX(err, std::string("copy_blocks: asking what the ") + what + " is");
  Region r;
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) {
    r.device = true;
    r.ordinal = attr.device;
  } else {
    r.pinned = attr.type == cudaMemoryTypeHost;
  }
  return r;
}

[[noreturn]] void refuse_pageable(const char* what, const void* base, std::size_t extent) {
  throw Error(Errc::invalid_argument,
              std::string("copy_blocks: the ") + what + " region (" + std::to_string(extent) + " bytes at " +
                  hex(base) +
                  ") is not page-locked to its end: allocate it with cudaHostAlloc (torch: pin_memory=True, "
                  "cupy: cupyx.empty_pinned) or pin it once with gpuxfer::register_host or cudaHostRegister");
}

void check_device_extent(const void* base, std::size_t extent, const char* what) {
  detail::AddressRange range;
  if (detail::address_range(base, range) != 0) return;  // the driver cannot say: trust the caller
  const auto begin = reinterpret_cast<std::uintptr_t>(base);
  if (extent > range.base + range.size - begin) {
    throw Error(Errc::invalid_argument, std::string("copy_blocks: the ") + what + " region needs " +
                                            std::to_string(extent) + " bytes from " + hex(base) +
                                            ", its allocation holds " +
                                            std::to_string(range.base + range.size - begin) + " from there");
  }
}

// The address at which the current device reaches host range [base, base + extent), or null.
void* mapped_address(void* base, std::size_t extent) {
  void* first = nullptr;
  void* last = nullptr;
  auto* end = static_cast<std::byte*>(base) + extent - 1;
  if (detail::handled(cudaHostGetDevicePointer(&first, base, 0)) != cudaSuccess) return nullptr;
  if (detail::handled(cudaHostGetDevicePointer(&last, end, 0)) != cudaSuccess) return nullptr;
  return static_cast<std::byte*>(last) - static_cast<std::byte*>(first) ==
                 static_cast<std::ptrdiff_t>(extent - 1)
             ? first
             : nullptr;
}

bool pairs_on_device(const std::int64_t* pairs, int ordinal) {
  cudaPointerAttributes attr{};
  if (detail::handled(cudaPointerGetAttributes(&attr, pairs)) != cudaSuccess) return false;
  if (attr.type != cudaMemoryTypeDevice) return false;  // host memory (managed too) is read on the host
  if (attr.device != ordinal) {
    throw Error(Errc::invalid_argument, "copy_blocks: the pairs are memory of device " +
                                            std::to_string(attr.device) + ", the copy runs on device " +
                                            std::to_string(ordinal));
  }
  return true;
}

void queue_copy_engine(std::span<const detail::BlockPiece> pieces, std::byte* src, std::byte* dst,
                       cudaStream_t stream) {
  for (const detail::BlockPiece& p : pieces) {
    if (p.height == 1) {
      GPUXFER_CUDA_TRY_CTX(
          cudaMemcpyAsync(dst + p.dst_offset, src + p.src_offset, p.width, cudaMemcpyDefault, stream),
          "copy_blocks");
    } else {
      GPUXFER_CUDA_TRY_CTX(cudaMemcpy2DAsync(dst + p.dst_offset, p.dst_pitch, src + p.src_offset, p.src_pitch,
                                             p.width, p.height, cudaMemcpyDefault, stream),
                           "copy_blocks");
    }
  }
}

// The calling thread's side streams on @p ordinal, created on first use (a stream costs far more than a
// small copy): batch_streams - 1 of them, the caller's stream carrying a batch's first part.
const std::vector<detail::Stream>& side_streams(int ordinal) {
  thread_local std::map<int, std::vector<detail::Stream>> per_device;
  std::vector<detail::Stream>& streams = per_device[ordinal];
  while (streams.size() + 1 < detail::batch_streams) streams.emplace_back(ordinal);
  return streams;
}

// Queues @p pieces as cudaMemcpyBatchAsync calls, split over streams from long rows: the first part on
// @p stream and the others on side streams forked from it.
void queue_batch(std::span<const detail::BlockPiece> pieces, std::byte* src, std::byte* dst,
                 cudaStream_t stream, int ordinal) {
  const std::size_t rows = detail::row_count(pieces);
  std::size_t total = 0;
  for (const detail::BlockPiece& p : pieces) total += p.width * p.height;
  const std::size_t parts = detail::batch_parts(total, rows);
  std::pmr::memory_resource* memory = detail::plan_memory();
  std::pmr::vector<void*> dsts(memory);
  std::pmr::vector<const void*> srcs(memory);
  std::pmr::vector<std::size_t> sizes(memory);
  dsts.reserve(rows);
  srcs.reserve(rows);
  sizes.reserve(rows);
  for (const detail::BlockPiece& p : pieces) {
    for (std::size_t r = 0; r < p.height; ++r) {
      dsts.push_back(dst + p.dst_offset + r * p.dst_pitch);
      srcs.push_back(src + p.src_offset + r * p.src_pitch);
      sizes.push_back(p.width);
    }
  }
  const auto batch = [&](std::size_t part, cudaStream_t s) {
    const std::size_t lo = detail::batch_cut(rows, parts, part);
    const std::size_t hi = detail::batch_cut(rows, parts, part + 1);
    cudaMemcpyAttributes attrs{};
    attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    std::size_t attrs_index = 0;
    GPUXFER_CUDA_TRY_CTX(cudaMemcpyBatchAsync(dsts.data() + lo, srcs.data() + lo, sizes.data() + lo, hi - lo,
                                              &attrs, &attrs_index, 1, s),
                         "copy_blocks: cudaMemcpyBatchAsync of " + std::to_string(hi - lo) + " copies");
  };
  if (parts == 1) {
    batch(0, stream);
    return;
  }
  const detail::SharedEvent fork = detail::record_event(ordinal, stream);
  const std::vector<detail::Stream>& side = side_streams(ordinal);
  std::size_t forked = 0;  // side streams that wait for the fork and must be joined back
  const auto join = [&] {
    for (std::size_t j = 0; j < forked; ++j)
      detail::stream_wait(stream, detail::record_event(ordinal, side[j].get()));
  };
  try {
    batch(0, stream);
    for (std::size_t j = 1; j < parts; ++j) {
      const cudaStream_t s = side[forked].get();
      detail::stream_wait(s, fork);
      ++forked;
      batch(j, s);
    }
  } catch (...) {
    join();  // what was queued stays ordered before the caller's later work
    throw;
  }
  join();
}

BlockPath queue_blocks(const BlockCopy& c, cudaStream_t stream, int stream_ordinal, bool capturing,
                       std::uint32_t* own_flag) {
  if (c.block_bytes == 0) throw Error(Errc::invalid_argument, "copy_blocks: block_bytes is 0");
  if (c.layers == 0) throw Error(Errc::invalid_argument, "copy_blocks: layers is 0");
  if (c.count > 0 && c.pairs == nullptr)
    throw Error(Errc::invalid_argument, "copy_blocks: the pairs are null");
  const detail::BlockGeometry src = detail::resolve_layout(c.src, c.block_bytes, c.layers, false, "source");
  const detail::BlockGeometry dst =
      detail::resolve_layout(c.dst, c.block_bytes, c.layers, true, "destination");
  const Region rs = classify(c.src.base, "source");
  const Region rd = classify(c.dst.base, "destination");
  if (!rs.device && !rd.device) {
    throw Error(Errc::unsupported, "copy_blocks: both regions are host memory: one must be device memory");
  }
  if (rs.device && rd.device && rs.ordinal != rd.ordinal) {
    throw Error(Errc::unsupported, "copy_blocks: the regions are memory of devices " +
                                       std::to_string(rs.ordinal) + " and " + std::to_string(rd.ordinal) +
                                       ": use copy_device_buffer between devices");
  }
  const int ordinal = rs.device ? rs.ordinal : rd.ordinal;
  if (stream_ordinal >= 0 && stream_ordinal != ordinal) {
    throw Error(Errc::invalid_argument, "copy_blocks: the stream belongs to device " +
                                            std::to_string(stream_ordinal) +
                                            ", the device region to device " + std::to_string(ordinal));
  }
  detail::DeviceGuard guard(ordinal);
  auto* src_base = static_cast<std::byte*>(c.src.base);
  auto* dst_base = static_cast<std::byte*>(c.dst.base);
  void* kernel_src = c.src.base;
  void* kernel_dst = c.dst.base;
  const struct {
    const Region& region;
    const detail::BlockGeometry& g;
    void* base;
    const char* what;
    void** kernel_address;
  } sides[] = {{rs, src, c.src.base, "source", &kernel_src},
               {rd, dst, c.dst.base, "destination", &kernel_dst}};
  for (const auto& s : sides) {
    if (s.g.extent == 0) continue;
    if (s.region.device) {
      check_device_extent(s.base, s.g.extent, s.what);
    } else {
      if (!s.region.pinned || !detail::is_pinned_range(s.base, s.g.extent))
        refuse_pageable(s.what, s.base, s.g.extent);
      *s.kernel_address = mapped_address(s.base, s.g.extent);
    }
  }
  const bool kernel_ok = kernel_src != nullptr && kernel_dst != nullptr;
  const detail::BlockKernelLayout layout{
      kernel_src,       kernel_dst, src.block_stride, src.layer_stride, dst.block_stride,
      dst.layer_stride, src.blocks, dst.blocks,       c.block_bytes,    c.layers};
  const auto refuse_kernel = [&] {
    throw Error(Errc::unsupported,
                "copy_blocks: BlockPath::kernel needs host memory that device " + std::to_string(ordinal) +
                    " maps (cudaHostAlloc, or cudaHostRegister with cudaHostRegisterMapped)");
  };
  if (c.count > 0 && pairs_on_device(c.pairs, ordinal)) {
    // The host cannot read the pairs: the kernel checks each one (see BlockCopy::error_flag).
    if (c.path != BlockPath::automatic && c.path != BlockPath::kernel) {
      throw Error(Errc::unsupported,
                  std::string("copy_blocks: BlockPath::") + to_string(c.path) +
                      " needs the pairs in host memory; pairs in device memory take the kernel");
    }
    if (!kernel_ok) refuse_kernel();
    std::uint32_t* flag = c.error_flag != nullptr ? c.error_flag : own_flag;
    GPUXFER_CUDA_TRY_CTX(detail::launch_block_copy_device_pairs(layout, c.pairs, c.count, flag, stream),
                         "copy_blocks: the kernel of " + std::to_string(c.count) + " pairs");
    return BlockPath::kernel;
  }
  const std::span<const std::int64_t> pairs(c.pairs, 2 * c.count);
  std::pmr::memory_resource* memory = detail::plan_memory();
  std::pmr::vector<detail::BlockRun> runs = detail::plan_block_runs(pairs, src.blocks, dst.blocks, memory);
  if (c.count == 0) return c.path;
  std::pmr::vector<detail::BlockPiece> pieces =
      detail::block_pieces(runs, src, dst, c.block_bytes, c.layers, memory);
  const std::size_t total = c.count * c.layers * c.block_bytes;
  const bool loads_host = !rs.device;
  const bool batch_ok = !capturing && stream != nullptr && stream != cudaStreamLegacy;
  BlockPath path =
      detail::choose_block_path(c.path, total, detail::row_count(pieces), kernel_ok, loads_host, batch_ok);
  if (path != BlockPath::kernel && runs.size() > 1) {
    // The copy engines gain from merges: try the runs in destination order.
    std::pmr::vector<detail::BlockRun> sorted = detail::runs_in_destination_order(runs, dst.blocks, memory);
    if (detail::destination_order_pays(runs.size(), sorted.size())) {
      pieces = detail::block_pieces(sorted, src, dst, c.block_bytes, c.layers, memory);
      path = detail::choose_block_path(c.path, total, detail::row_count(pieces), kernel_ok, loads_host,
                                       batch_ok);
    }
  }
  switch (path) {
    case BlockPath::kernel:
      if (!kernel_ok) refuse_kernel();
      GPUXFER_CUDA_TRY_CTX(detail::launch_block_copy_host_pairs(layout, c.pairs, c.count, stream),
                           "copy_blocks: the kernel of " + std::to_string(c.count) + " pairs");
      break;
    case BlockPath::batch:
      if (stream == nullptr || stream == cudaStreamLegacy) {
        throw Error(Errc::unsupported,
                    "copy_blocks: cudaMemcpyBatchAsync refuses the legacy default stream: "
                    "give a stream of your own");
      }
      queue_batch(pieces, src_base, dst_base, stream, ordinal);
      break;
    default:
      path = BlockPath::copy_engine;
      queue_copy_engine(pieces, src_base, dst_base, stream);
      break;
  }
  return path;
}

// The blocking form's stream and error flag, one per thread and device: created once, since creating a
// stream or pinning a word costs far more than a small copy.
struct BlockingResources {
  detail::Stream stream;
  std::uint32_t* flag = nullptr;  // page-locked, mapped
  explicit BlockingResources(int ordinal) : stream(ordinal) {
    const detail::RelaxedCapture relaxed;
    void* p = nullptr;
    GPUXFER_CUDA_TRY_CTX(
        cudaHostAlloc(&p, sizeof(std::uint32_t), cudaHostAllocMapped | cudaHostAllocPortable),
        "copy_blocks: its error flag");
    flag = static_cast<std::uint32_t*>(p);
  }
  ~BlockingResources() {
    if (flag != nullptr) (void)detail::handled(cudaFreeHost(flag));
  }
  BlockingResources(const BlockingResources&) = delete;
  BlockingResources& operator=(const BlockingResources&) = delete;
};

BlockingResources& blocking_resources(int ordinal) {
  thread_local std::map<int, std::unique_ptr<BlockingResources>> per_device;
  auto& r = per_device[ordinal];
  if (!r) r = std::make_unique<BlockingResources>(ordinal);
  return *r;
}

int device_of(const BlockCopy& c) {
  const Region rs = classify(c.src.base, "source");
  if (rs.device) return rs.ordinal;
  const Region rd = classify(c.dst.base, "destination");
  if (rd.device) return rd.ordinal;
  throw Error(Errc::unsupported, "copy_blocks: both regions are host memory: one must be device memory");
}

}  // namespace

const char* to_string(BlockPath path) noexcept {
  switch (path) {
    case BlockPath::automatic:
      return "automatic";
    case BlockPath::copy_engine:
      return "copy_engine";
    case BlockPath::batch:
      return "batch";
    case BlockPath::kernel:
      return "kernel";
  }
  return "?";
}

BlockPath copy_blocks_async(const BlockCopy& copy, cudaStream_t stream) {
  nvtx3::scoped_range range{"gpuxfer::copy_blocks_async"};
  if (copy.src.base == nullptr || copy.dst.base == nullptr) {
    throw Error(Errc::invalid_argument, "copy_blocks: a region's base is null");
  }
  int stream_ordinal = -1;
  bool capturing = false;
  if (!detail::is_default_stream(stream)) {
    const detail::CallerStream caller = detail::caller_stream(stream, "copy_blocks", "the stream");
    capturing = caller.capturing;
    if (!capturing) stream_ordinal = caller.ordinal;
  }
  return queue_blocks(copy, stream, stream_ordinal, capturing, nullptr);
}

BlockPath copy_blocks(const BlockCopy& copy) {
  nvtx3::scoped_range range{"gpuxfer::copy_blocks"};
  if (copy.src.base == nullptr || copy.dst.base == nullptr) {
    throw Error(Errc::invalid_argument, "copy_blocks: a region's base is null");
  }
  const int ordinal = device_of(copy);
  detail::DeviceGuard guard(ordinal);
  BlockingResources& r = blocking_resources(ordinal);
  *r.flag = 0;
  // Ordered as cudaMemcpy is: after the work queued on the device's legacy default stream.
  detail::stream_wait(r.stream.get(), detail::record_event(ordinal, cudaStreamLegacy));
  const BlockPath path = queue_blocks(copy, r.stream.get(), ordinal, false, r.flag);
  const detail::SharedEvent done = detail::record_event(ordinal, r.stream.get());
  GPUXFER_CUDA_TRY_CTX(done->synchronize(), "copy_blocks: waiting for the copies");
  if (*reinterpret_cast<volatile std::uint32_t*>(r.flag) != 0) {
    throw Error(Errc::invalid_argument,
                "copy_blocks: a pair in device memory named a block out of range (the source holds " +
                    std::to_string(copy.src.blocks) + ", the destination " + std::to_string(copy.dst.blocks) +
                    "); the kernel skipped such pairs and copied the others");
  }
  return path;
}

}  // namespace gpuxfer
