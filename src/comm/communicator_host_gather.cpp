// Communicator::gather_to_host: every rank's device bytes into HostBuffers on the root, each rank over its
// own PCIe link where it can. Every part lands in a POSIX shared segment of the root's arena (reused from
// call to call, page-locked once in each process that maps it), and the root's results are HostBuffers
// that view it: the ranks of the root's node copy from their GPUs straight into their parts (through
// mappings they keep), the root copies its own part down, and the ranks of other nodes send over NCCL to
// the root's GPU, which copies their parts down. Exchanges of two words a rank order it: the sizes, the
// root's "ready" (segment and staging made, the segment's id, or why not) and every rank's "done" (its part
// written, or why not), so that a failure on one rank makes every rank throw instead of wait.
#include <gpuxfer/communicator.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nccl.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/host_buffer.hpp>

#include "comm/comm_launch.hpp"
#include "comm/host_transfer.hpp"
#include "comm/segment_arena.hpp"
#include "comm/shared_segment.hpp"
#include "memory/host_buffer_view.hpp"

namespace gpuxfer {
namespace {

using detail::CommunicatorState;
using detail::HostGatherPlan;
using detail::HostRoute;
using detail::Outcome;
using detail::rank_text;

// The root: a segment of its arena and the staging ("ready"), NCCL's receives, the copies down, and the
// results, HostBuffers that view the segment.
struct RootSide {
  CommunicatorState& s;
  const std::vector<std::uint64_t>& sizes;
  const HostGatherPlan& plan;
  const std::string& what;
  std::shared_ptr<detail::ArenaEntry> entry;

  // After a failure a copy into the segment may still be queued: the arena reuses it only after that.
  ~RootSide() { detail::release_after_stream(entry, s.device, s.stream.get()); }

  void prepare() {
    const detail::NodeRecord& me = s.nodes[static_cast<std::size_t>(s.rank)];
    entry = s.arena.acquire(plan.segment_bytes, me.pid, me.nonce, s.device, s.where + ": " + what);
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

  [[nodiscard]] std::byte* part(std::size_t r) const { return entry->segment.data() + plan.offset[r]; }

  // Its own bytes down, other nodes' bytes over NCCL on the communicator's stream, then down, each
  // straight into its part of the segment.
  void queue(const void* send) {
    const cudaStream_t stream = s.stream.get();
    const auto me = static_cast<std::size_t>(s.rank);
    const auto own_part = [&](cudaStream_t on) {
      if (sizes[me] == 0) return;
      GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(part(me), send, sizes[me], cudaMemcpyDeviceToHost, on),
                           s.where + ": " + what + ": its own part");
    };
    if (plan.staging_bytes == 0) {
      own_part(stream);
      return;
    }
    if (s.down.get() == nullptr) s.down = detail::Stream(s.device);
    const cudaStream_t down = s.down.get();
    // Whatever happens below, the communicator's stream ends after the copies down: the "done" exchange
    // and the release of the segment after a failure wait for them there.
    struct Join {
      detail::CommunicatorState& s;
      ~Join() {
        try {
          detail::stream_wait(s.stream.get(), detail::record_event(s.device, s.down.get()));
        } catch (...) {
          (void)cudaStreamSynchronize(s.down.get());
        }
      }
    } join{s};
    // Its own part goes down while NCCL brings the first pieces, after what the call waits for.
    detail::stream_wait(down, detail::record_event(s.device, stream));
    own_part(down);
    // Piece k of every other node's part: NCCL receives it into the staging on this stream, then the
    // down stream copies it to the segment while NCCL receives piece k + 1 (network_piece on both ends).
    const auto some_part_has = [&](std::size_t k) {
      for (std::size_t r = 0; r < sizes.size(); ++r) {
        if (piece_of(r, k).second > 0) return true;
      }
      return false;
    };
    for (std::size_t k = 0; some_part_has(k); ++k) {
      detail::launch(s, stream, what, detail::other_ranks(s.rank, s.world_size), [&]() -> ncclResult_t {
        for (int r = 0; r < s.world_size; ++r) {
          const auto [begin, length] = piece_of(static_cast<std::size_t>(r), k);
          if (length == 0) continue;
          const ncclResult_t got = ncclRecv(s.staging.get() + plan.staging_offset[static_cast<std::size_t>(r)] + begin,
                                            length, ncclUint8, r, s.comm.get(), stream);
          if (got != ncclSuccess && got != ncclInProgress) return got;
        }
        return ncclSuccess;
      });
      detail::stream_wait(down, s.last);  // launch() recorded the end of this piece's receives
      for (int r = 0; r < s.world_size; ++r) {
        const auto i = static_cast<std::size_t>(r);
        const auto [begin, length] = piece_of(i, k);
        if (length == 0) continue;
        GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(part(i) + begin, s.staging.get() + plan.staging_offset[i] + begin,
                                             length, cudaMemcpyDeviceToHost, down),
                             s.where + ": " + what + ": " + rank_text(r) + "'s part, from the staging");
      }
    }
  }

  // Where piece @p k of rank @p r's part lies in it, and its length (0 when the rank has no such piece or
  // is not of another node).
  [[nodiscard]] std::pair<std::size_t, std::size_t> piece_of(std::size_t r, std::size_t k) const {
    if (plan.route[r] != HostRoute::network || sizes[r] == 0) return {0, 0};
    const auto bytes = static_cast<std::size_t>(sizes[r]);
    const std::size_t piece = detail::network_piece(bytes);
    const std::size_t begin = k * piece;
    return begin < bytes ? std::pair{begin, std::min(piece, bytes - begin)} : std::pair{begin, std::size_t{0}};
  }

  // After every rank said "done": every part is in the segment; the results view it (and keep it).
  [[nodiscard]] std::vector<HostBuffer> results() {
    std::vector<HostBuffer> out(sizes.size());
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      if (sizes[r] > 0) out[r] = detail::host_buffer_view(entry, part(r), static_cast<std::size_t>(sizes[r]));
    }
    entry.reset();
    return out;
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
  const bool is_root = s.rank == root;
  if (plan.segment_bytes == 0) {  // nobody sends a byte
    return is_root ? std::vector<HostBuffer>(sizes.size()) : std::vector<HostBuffer>{};
  }

  RootSide side{s, sizes, plan, what, {}};
  Outcome ready{s.comm, {}};
  if (is_root) ready.run([&] { side.prepare(); });
  const std::string ready_step = "the root's preparation (shared segment, staging)";
  const std::uint64_t id = detail::exchange_outcomes_with(s, ready, side.entry ? side.entry->id : 0, root,
                                                          what, "ready", ready_step);
  const std::string name = detail::segment_name(s, root, id);

  const auto me = static_cast<std::size_t>(s.rank);
  Outcome done{s.comm, {}};
  if (is_root) {
    done.run([&] { side.queue(send); });
  } else if (plan.route[me] == HostRoute::segment && bytes > 0) {
    done.run([&] { detail::copy_with_segment(s, name, plan.offset[me], bytes, send, nullptr, root, what); });
  } else if (plan.route[me] == HostRoute::network && bytes > 0) {
    const cudaStream_t stream = s.stream.get();
    done.run([&] {
      // In the pieces the root receives, one group each (network_piece): it takes each down as the next
      // arrives.
      const std::size_t piece = detail::network_piece(bytes);
      const auto* from = static_cast<const std::byte*>(send);
      for (std::size_t begin = 0; begin < bytes; begin += piece) {
        const std::size_t length = std::min(piece, bytes - begin);
        detail::launch(s, stream, what, rank_text(root),
                       [&] { return ncclSend(from + begin, length, ncclUint8, root, s.comm.get(), stream); });
      }
    });
  }
  // Queued after this rank's copies: when the root has every rank's "done", every byte is in place.
  detail::exchange_outcomes(s, done, what, "done", "writing a part");
  s.last = detail::record_event(s.device, s.stream.get());
  return is_root ? side.results() : std::vector<HostBuffer>{};
}

}  // namespace gpuxfer
