// gather_slices: many small device ranges to the host, packed on each GPU by one kernel and moved by
// one copy per run of consecutive slices of that device.
#include <gpuxfer/detail/device_guard.hpp>
#include <gpuxfer/inter_gpu_transfer.hpp>

#include <cstring>
#include <string>

#include <nvtx3/nvtx3.hpp>

#include <gpuxfer/error.hpp>

#include "cuda/copy_kernels.hpp"
#include "engine/operation_state.hpp"
#include "engine/ordering.hpp"
#include "engine/transfer_state.hpp"
#include "memory/host_memory.hpp"
#include "node/pointer_checks.hpp"
#include "runtime/capture_mode.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/drain.hpp"

namespace gpuxfer {
namespace {

// A run of consecutive slices of one device: one contiguous region of the output.
struct Run {
  std::size_t out_offset;
  std::size_t packed_offset;
  std::size_t size;
};

struct DevicePlan {
  std::vector<detail::PackItem> items;
  std::vector<Run> runs;
  std::size_t packed = 0;
  std::vector<detail::AddressRange> checked;  // allocations already validated
};

bool inside(const std::vector<detail::AddressRange>& ranges, const DeviceSlice& s) {
  const auto begin = reinterpret_cast<std::uintptr_t>(s.ptr);
  for (const auto& r : ranges) {
    if (begin >= r.base && begin - r.base <= r.size && s.size <= r.size - (begin - r.base)) return true;
  }
  return false;
}

std::vector<DevicePlan> plan(const detail::ManagerState& m, std::span<const DeviceSlice> slices, std::size_t& total) {
  std::vector<DevicePlan> plans(m.size());
  total = 0;
  std::size_t previous_device = m.size();
  for (const DeviceSlice& s : slices) {
    detail::check_index(m, s.device, "gather_slices slice device");
    if (s.size == 0) continue;
    DevicePlan& p = plans[s.device];
    // Validate each allocation once: a thousand slices of one buffer cost one driver query.
    if (!inside(p.checked, s)) {
      p.checked.push_back(detail::validate_device_range(m, s.device, s.ptr, s.size, "gather_slices slice"));
    }
    p.items.push_back({s.ptr, p.packed, s.size});
    if (previous_device == s.device) {
      p.runs.back().size += s.size;
    } else {
      p.runs.push_back({total, p.packed, s.size});
    }
    p.packed += s.size;
    total += s.size;
    previous_device = s.device;
  }
  return plans;
}

std::size_t queue_gather_slices(detail::TransferState& t, std::span<const DeviceSlice> slices, std::span<std::byte> out,
                                cudaStream_t caller, bool blocking) {
  detail::ManagerState& m = t.m;
  std::size_t total = 0;
  std::vector<DevicePlan> plans = plan(m, slices, total);
  if (out.size() < total) {
    throw Error(Errc::invalid_argument, "gather_slices: the output holds " + std::to_string(out.size()) +
                                            " bytes, the slices need " + std::to_string(total));
  }
  if (total == 0) return 0;
  const bool pinned_out = detail::is_pinned_range(out.data(), total);
  detail::OperationOrder order(m, caller, "gather_slices");
  order.refuse_capture("its table of slices is uploaded from pooled pinned memory at each call");
  // The slices are caller memory: each device's copies wait for the caller's stream (of that device).
  std::vector<detail::DeviceRange> marks(plans.size());
  for (std::size_t d = 0; d < plans.size(); ++d) {
    marks[d].device = d;
    if (!plans[d].items.empty()) order.add(marks[d], detail::Access::read);
  }
  order.begin();
  detail::OperationState op("gather_slices");
  std::vector<HostBuffer> staged(plans.size());
  // Each device's table of slices, read by its H2D: held here until handed to @p op, so that the drain
  // below runs before a table the GPU may still read goes back to the pool.
  std::vector<HostBuffer> tables(plans.size());
  {
    detail::DrainOnError drain;
    for (std::size_t d = 0; d < plans.size(); ++d) {
      DevicePlan& p = plans[d];
      if (p.items.empty()) continue;
      detail::DeviceStreams& s = detail::streams_for(m, marks[d]);
      detail::DeviceGuard guard(s.ordinal);
      const detail::RelaxedCapture relaxed;  // the scratch's stream-ordered allocation, on gpuxfer's stream
      const cudaStream_t stream = s.d2h.get();
      drain.add(stream);
      detail::stream_wait(stream, marks[d].ready);
      const std::string what = "gather_slices of " + std::to_string(p.items.size()) + " slices on " + detail::device_name(m, d);
      const std::size_t items_bytes = (p.items.size() * sizeof(detail::PackItem) + 255) / 256 * 256;
      HostBuffer& items = tables[d] = m.pool.acquire(items_bytes, m.staging_node(d));
      std::memcpy(items.data(), p.items.data(), p.items.size() * sizeof(detail::PackItem));
      if (!pinned_out) staged[d] = m.pool.acquire(p.packed, m.staging_node(d));
      void* scratch = nullptr;
      GPUXFER_CUDA_TRY_CTX(cudaMallocFromPoolAsync(&scratch, items_bytes + p.packed, s.scratch.get(), stream), what);
      auto* table = static_cast<detail::PackItem*>(scratch);
      auto* packed = static_cast<std::byte*>(scratch) + items_bytes;
      cudaError_t err = cudaMemcpyAsync(table, items.data(), items_bytes, cudaMemcpyHostToDevice, stream);
      if (err == cudaSuccess) err = detail::launch_pack(table, p.items.size(), packed, stream);
      for (const Run& run : p.runs) {
        std::byte* dst = pinned_out ? out.data() + run.out_offset : staged[d].data() + run.packed_offset;
        if (err == cudaSuccess) err = cudaMemcpyAsync(dst, packed + run.packed_offset, run.size, cudaMemcpyDeviceToHost, stream);
      }
      const cudaError_t freed = cudaFreeAsync(scratch, stream);
      GPUXFER_CUDA_TRY_CTX(err == cudaSuccess ? freed : err, what);
      detail::SharedEvent finished = detail::record_event(s.ordinal, stream);
      order.done(marks[d], {finished});
      op.track(finished, detail::device_name(m, d));
      op.hold(std::move(items), finished);
    }
    order.join();  // within the drain's scope: should it fail, the copies into @p out finish first
  }
  if (!blocking && pinned_out) return total;  // done when the caller's stream gets there
  op.wait();
  if (!pinned_out) {
    for (std::size_t d = 0; d < plans.size(); ++d) {
      for (const Run& run : plans[d].runs) {
        m.host_copy(d).copy(out.data() + run.out_offset, staged[d].data() + run.packed_offset, run.size);
      }
    }
  }
  return total;
}

}  // namespace

std::size_t InterGpuTransfer::gather_slices(std::span<const DeviceSlice> slices, std::span<std::byte> out) {
  nvtx3::scoped_range range{"gpuxfer::gather_slices"};
  // Ordered with the legacy default stream of each device, as cudaMemcpy is: the slices are caller memory.
  return queue_gather_slices(*state_, slices, out, cudaStreamLegacy, true);
}

std::size_t InterGpuTransfer::gather_slices_async(std::span<const DeviceSlice> slices, std::span<std::byte> out,
                                                  cudaStream_t stream) {
  nvtx3::scoped_range range{"gpuxfer::gather_slices_async"};
  return queue_gather_slices(*state_, slices, out, stream, false);
}

}  // namespace gpuxfer
