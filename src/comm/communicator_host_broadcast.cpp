// Communicator::broadcast_from_host: the root's host bytes into every rank's device memory, each rank of
// the root's node over its own PCIe link. The root writes the bytes once into a POSIX shared segment of its
// arena (reused from call to call, page-locked once), which every other rank of its node copies into its
// GPU through a mapping it keeps; the root copies them into its own GPU, and from there over NCCL to the
// ranks of other nodes. Exchanges of two words a rank order it, as gather_to_host's: the root's size and
// every rank's capacity, the root's "ready" (segment written and its own copy queued, the segment's id, or
// why not) and every rank's "done" (its bytes in place, or why not), so that a failure on one rank makes
// every rank throw instead of wait.
#include <gpuxfer/communicator.hpp>

#include <memory>
#include <string>
#include <vector>

#include <nccl.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/host_buffer.hpp>

#include "comm/comm_launch.hpp"
#include "comm/host_transfer.hpp"
#include "comm/segment_arena.hpp"
#include "memory/host_memory.hpp"

namespace gpuxfer {
namespace {

using detail::CommunicatorState;
using detail::HostBroadcastPlan;
using detail::HostRoute;
using detail::Outcome;
using detail::rank_text;

// The root: a segment of its arena written and its own copy queued ("ready"), then NCCL's sends to other
// nodes.
struct RootSide {
  CommunicatorState& s;
  std::span<const std::byte> data;
  void* recv;
  const HostBroadcastPlan& plan;
  const std::string& what;
  std::shared_ptr<detail::ArenaEntry> entry;
  HostBuffer staged;  ///< pinned copy of pageable data, when there is no segment to copy from

  // The call's copies may still be queued after a failure: the staging and the segment go back after them.
  ~RootSide() {
    if (!staged.empty()) detail::give_back_after_stream(s, std::span(&staged, 1));
    detail::release_after_stream(entry, s.device, s.stream.get());
  }

  void prepare() {
    // The root's own copy reads page-locked memory: the segment (page-locked once, in the arena), the
    // caller's data when all of it is page-locked, else pinned memory of the pool. A copy from pageable
    // memory would synchronise the stream on the host, a wait no timeout bounds.
    const std::byte* source = data.data();
    if (plan.segment_bytes > 0) {
      const detail::NodeRecord& me = s.nodes[static_cast<std::size_t>(s.rank)];
      entry = s.arena.acquire(plan.segment_bytes, me.pid, me.nonce, s.device, s.where + ": " + what);
      detail::host_copy_of(s).copy(entry->segment.data(), data.data(), data.size());
      source = entry->segment.data();
    } else if (!detail::is_pinned_range(data.data(), data.size())) {
      staged = detail::pool_of(s).acquire(data.size());
      detail::host_copy_of(s).copy(staged.data(), data.data(), data.size());
      source = staged.data();
    }
    GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(recv, source, data.size(), cudaMemcpyHostToDevice, s.stream.get()),
                         s.where + ": " + what + ": its own copy");
  }

  // Queued after its own copy (same stream): its recv to every rank of another node.
  void send() {
    if (!plan.network) return;
    const cudaStream_t stream = s.stream.get();
    detail::launch(s, stream, what, detail::other_ranks(s.rank, s.world_size), [&]() -> ncclResult_t {
      for (int r = 0; r < s.world_size; ++r) {
        if (plan.route[static_cast<std::size_t>(r)] != HostRoute::network) continue;
        const ncclResult_t sent = ncclSend(recv, data.size(), ncclUint8, r, s.comm.get(), stream);
        if (sent != ncclSuccess && sent != ncclInProgress) return sent;
      }
      return ncclSuccess;
    });
  }
};

// This rank's bytes into its recv: out of the root's segment, or over NCCL from the root's GPU.
void take(CommunicatorState& s, const HostBroadcastPlan& plan, void* recv, std::size_t bytes,
          const std::string& name, int root, const std::string& what) {
  if (plan.route[static_cast<std::size_t>(s.rank)] == HostRoute::segment) {
    detail::copy_with_segment(s, name, 0, bytes, nullptr, recv, root, what);
    return;
  }
  const cudaStream_t stream = s.stream.get();
  detail::launch(s, stream, what, rank_text(root),
                 [&] { return ncclRecv(recv, bytes, ncclUint8, root, s.comm.get(), stream); });
}

}  // namespace

void Communicator::broadcast_from_host(std::span<const std::byte> data, void* recv, std::size_t capacity,
                                       int root) {
  CommunicatorState& s = *state_;
  detail::DeviceGuard guard(s.device);
  const std::string what = "broadcast_from_host from " + rank_text(root);
  detail::check_rank(s, root, "root", what);
  s.comm.check_usable(what);
  // A null recv is refused below, on every rank, when the root has bytes for it.
  if (recv != nullptr) detail::check_buffer(s, recv, capacity, "recv", what);
  // After the legacy default stream's work, as the other blocking forms.
  detail::stream_wait(s.stream.get(), detail::record_event(s.device, cudaStreamLegacy));
  detail::know_nodes(s, what);
  const bool is_root = s.rank == root;
  const std::vector<std::uint64_t> pairs = detail::all_gather_pairs(
      s, is_root ? data.size() : 0, recv != nullptr ? capacity : 0, what + " (the exchange of sizes)");
  const std::uint64_t bytes = pairs[2 * static_cast<std::size_t>(root)];
  if (recv == nullptr && bytes > 0) {
    throw Error(Errc::invalid_argument,
                s.where + ": " + what + ": recv is null for the root's " + detail::bytes_text(bytes));
  }
  std::vector<std::uint64_t> capacities(static_cast<std::size_t>(s.world_size));
  for (std::size_t r = 0; r < capacities.size(); ++r) capacities[r] = pairs[2 * r + 1];
  const HostBroadcastPlan plan =
      detail::plan_host_broadcast(bytes, capacities, s.node_leaders, root, s.where + ": " + what);
  if (bytes == 0) return;

  // The size exchange ran after the legacy default stream's work and was waited for: the root's host reads
  // of data below come after that work too (a copy into data queued there, say).
  RootSide side{s, data, recv, plan, what, {}, {}};
  Outcome ready{s.comm, {}};
  if (is_root) ready.run([&] { side.prepare(); });
  const std::uint64_t id =
      detail::exchange_outcomes_with(s, ready, side.entry ? side.entry->id : 0, root, what, "ready",
                                     "the root's preparation (shared segment, its own copy)");

  Outcome done{s.comm, {}};
  if (is_root) {
    done.run([&] { side.send(); });
  } else {
    done.run([&] {
      take(s, plan, recv, static_cast<std::size_t>(bytes), detail::segment_name(s, root, id), root, what);
    });
  }
  // Queued after this rank's copies: when it completes, this rank's recv holds the bytes (and the root's
  // sends are over), so the segment may serve another call.
  detail::exchange_outcomes(s, done, what, "done", "taking the bytes");
  side.entry.reset();
}

}  // namespace gpuxfer
