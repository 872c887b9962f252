// Communicator::gather_to_host: every rank's device bytes into HostBuffers on the root, each rank over its
// own PCIe link where it can. The ranks of the root's node copy from their GPUs straight into a POSIX
// shared segment that the root made (each page-locks its own part); the ranks of other nodes send over
// NCCL to the root's GPU, which copies them down. Exchanges of two words a rank order it: the sizes, the
// root's "ready" (buffers, segment and staging made, or why not) and every rank's "done" (its part
// written, or why not), so that a failure on one rank makes every rank throw instead of wait.
#include <gpuxfer/communicator.hpp>

#include <cstring>
#include <string>
#include <vector>

#include <nccl.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/host_buffer.hpp>

#include "comm/comm_launch.hpp"
#include "comm/host_transfer.hpp"
#include "comm/shared_segment.hpp"

namespace gpuxfer {
namespace {

using detail::CommunicatorState;
using detail::HostGatherPlan;
using detail::HostRoute;
using detail::Outcome;
using detail::pool_of;
using detail::rank_text;

// The root: its buffers, the segment and the staging made ("ready"), NCCL's receives, the copies down.
struct RootSide {
  CommunicatorState& s;
  const std::vector<std::uint64_t>& sizes;
  const HostGatherPlan& plan;
  const std::string& what;
  std::vector<HostBuffer> out;
  detail::SharedSegment segment;

  void prepare(const std::string& name) {
    for (int r = 0; r < s.world_size; ++r)
      out.push_back(pool_of(s).acquire(sizes[static_cast<std::size_t>(r)]));
    if (plan.segment_bytes > 0) segment = detail::SharedSegment::create(name, plan.segment_bytes);
    if (plan.staging_bytes > s.staging_bytes) {
      s.staging.reset();
      s.staging_bytes = 0;
      void* ptr = nullptr;
      GPUXFER_CUDA_TRY_CTX(cudaMalloc(&ptr, plan.staging_bytes),
                           s.where + ": " + what + ": the staging of other nodes' bytes");
      s.staging = std::unique_ptr<std::byte, detail::DeviceFree>(static_cast<std::byte*>(ptr), {s.device});
      s.staging_bytes = plan.staging_bytes;
    }
  }

  // Queued on the communicator's stream: its own bytes down, other nodes' bytes over NCCL, then down.
  void queue(const void* send) {
    const cudaStream_t stream = s.stream.get();
    const std::size_t mine = sizes[static_cast<std::size_t>(s.rank)];
    if (mine > 0) {
      GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(out[static_cast<std::size_t>(s.rank)].data(), send, mine,
                                           cudaMemcpyDeviceToHost, stream),
                           s.where + ": " + what + ": its own part");
    }
    if (plan.staging_bytes == 0) return;
    detail::launch(s, stream, what, detail::other_ranks(s.rank, s.world_size), [&]() -> ncclResult_t {
      for (int r = 0; r < s.world_size; ++r) {
        const auto i = static_cast<std::size_t>(r);
        if (plan.route[i] != HostRoute::network || sizes[i] == 0) continue;
        const ncclResult_t got =
            ncclRecv(s.staging.get() + plan.offset[i], sizes[i], ncclUint8, r, s.comm.get(), stream);
        if (got != ncclSuccess && got != ncclInProgress) return got;
      }
      return ncclSuccess;
    });
    for (int r = 0; r < s.world_size; ++r) {
      const auto i = static_cast<std::size_t>(r);
      if (plan.route[i] != HostRoute::network || sizes[i] == 0) continue;
      GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(out[i].data(), s.staging.get() + plan.offset[i], sizes[i],
                                           cudaMemcpyDeviceToHost, stream),
                           s.where + ": " + what + ": " + rank_text(r) + "'s part, from the staging");
    }
  }

  // After every rank said "done": the local ranks' parts out of the segment.
  void collect() {
    for (int r = 0; r < s.world_size; ++r) {
      const auto i = static_cast<std::size_t>(r);
      if (plan.route[i] != HostRoute::segment || sizes[i] == 0) continue;
      std::memcpy(out[i].data(), segment.data() + plan.offset[i], sizes[i]);
    }
    segment.reset();
  }
};

}  // namespace

std::vector<HostBuffer> Communicator::gather_to_host(const void* send, std::size_t bytes, int root) {
  CommunicatorState& s = *state_;
  detail::DeviceGuard guard(s.device);
  const std::string what = "gather_to_host of " + detail::bytes_text(bytes) + " to " + rank_text(root);
  detail::check_rank(s, root, "root", what);
  s.comm.check_usable(what);
  detail::check_buffer(s, send, bytes, "send", what);
  // After the legacy default stream's work, as the other blocking forms.
  detail::stream_wait(s.stream.get(), detail::record_event(s.device, cudaStreamLegacy));
  detail::know_nodes(s, what);
  const std::vector<std::uint64_t> pairs =
      detail::all_gather_pairs(s, bytes, 0, what + " (the exchange of sizes)");
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(s.world_size));
  for (std::size_t r = 0; r < sizes.size(); ++r) sizes[r] = pairs[2 * r];
  const HostGatherPlan plan = detail::plan_host_gather(sizes, s.node_leaders, root, detail::page_size());
  const std::uint64_t call = s.host_calls++;
  const detail::NodeRecord& root_node = s.nodes[static_cast<std::size_t>(root)];
  const std::string name = detail::shared_segment_name(root_node.pid, root_node.nonce, call);
  const bool is_root = s.rank == root;
  const bool nothing =
      plan.segment_bytes == 0 && plan.staging_bytes == 0 && sizes[static_cast<std::size_t>(root)] == 0;
  if (nothing) return is_root ? std::vector<HostBuffer>(sizes.size()) : std::vector<HostBuffer>{};

  RootSide side{s, sizes, plan, what, {}, {}};
  Outcome ready{s.comm, {}};
  if (is_root) ready.run([&] { side.prepare(name); });
  const std::string ready_step = "the root's preparation (HostBuffers, shared segment, staging)";
  detail::exchange_outcomes(s, ready, what, "ready", ready_step);

  const auto me = static_cast<std::size_t>(s.rank);
  Outcome done{s.comm, {}};
  try {
    if (is_root) {
      done.run([&] { side.queue(send); });
    } else if (plan.route[me] == HostRoute::segment && bytes > 0) {
      done.run([&] {
        detail::copy_with_segment(s, name, plan.offset[me], bytes, send, nullptr, root, what);
      });
    } else if (plan.route[me] == HostRoute::network && bytes > 0) {
      const cudaStream_t stream = s.stream.get();
      done.run([&] {
        detail::launch(s, stream, what, rank_text(root),
                       [&] { return ncclSend(send, bytes, ncclUint8, root, s.comm.get(), stream); });
      });
    }
    // Queued after this rank's copies: when the root has every rank's "done", every byte is in place.
    detail::exchange_outcomes(s, done, what, "done", "writing a part");
    if (is_root) side.collect();
  } catch (...) {
    detail::give_back_after_stream(s, side.out);
    throw;
  }
  s.last = detail::record_event(s.device, s.stream.get());
  return is_root ? std::move(side.out) : std::vector<HostBuffer>{};
}

}  // namespace gpuxfer
