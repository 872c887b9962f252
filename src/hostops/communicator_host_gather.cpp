// Communicator::gather_to_host(_async): every rank's device bytes into HostBuffers on the root, each rank
// over its own PCIe link where it can. Every part lands in a POSIX shared segment of the root's arena
// (reused from call to call, page-locked once in each process that maps it), and the root's results are
// HostBuffers that view it: the ranks of the root's node copy from their GPUs straight into their parts
// (through mappings they keep), the root copies its own part down, and the ranks of other nodes send over
// NCCL to the root's GPU, which copies their parts down. Exchanges of a few words a rank order it: the
// sizes, with the root's offer of a segment set aside (as large as its last call's) and of its staging;
// the root's "ready" (segment and staging made, the segment's id, or why not) only when the offer does
// not fit; then every rank's "done" (its part written, or why not) for the blocking form, or "queued"
// (its copy through the segment queued, or why not) before the NCCL work and a reduction to the root on
// the caller's stream for the stream-ordered one. So a failure on one rank makes every rank throw
// instead of wait.
#include <gpuxfer/communicator.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nccl.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/host_buffer.hpp>

#include "communicator/comm_launch.hpp"
#include "hostops/host_transfer.hpp"
#include "hostops/segment_arena.hpp"
#include "hostops/shared_segment.hpp"
#include "memory/host_buffer_view.hpp"
#include "runtime/capture_mode.hpp"
#include "runtime/cuda_check.hpp"

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
  cudaStream_t stream;  ///< where the call's copies and receives go: the communicator's, or the caller's
  std::shared_ptr<detail::ArenaEntry> entry;

  // The call's copies into the segment may still be queued (a stream-ordered call's, or a failed one's):
  // the arena hands it out again only after them.
  ~RootSide() { detail::release_after_stream(entry, s.device, stream); }

  // Before the sizes are known: a free segment of the arena as large as the last call's, if any.
  void set_aside() {
    if (s.last_gather_segment > 0) entry = s.arena.acquire_existing(s.last_gather_segment);
  }
  [[nodiscard]] detail::RootOffer offer() const {
    if (!entry) return {0, 0, s.staging_bytes};
    return {entry->id + 1, entry->segment.size(), s.staging_bytes};
  }

  // The offer did not fit: a segment of the plan's size, and the staging.
  void prepare() {
    entry.reset();  // set aside but too small: free again (nothing was queued on it)
    const detail::NodeRecord& me = s.nodes[static_cast<std::size_t>(s.rank)];
    entry = s.arena.acquire(plan.segment_bytes, me.pid, me.nonce, s.device, s.where + ": " + what, s.timeout);
    if (plan.staging_bytes > s.staging_bytes) {
      // No earlier call uses it still, a stream-ordered one neither: the size exchange, waited for on the
      // host, ran after the communicator's previous operation had ended. Freed and made in stream order
      // on the communicator's stream, whose "ready" exchange the host waits for next (the new staging is
      // there for every stream after it): cudaFree would wait for all of the device's work, a
      // stream-ordered caller's producer too.
      const std::string step = s.where + ": " + what + ": the staging of other nodes' bytes";
      const detail::RelaxedCapture relaxed;
      s.staging_bytes = 0;
      if (s.staging) GPUXFER_CUDA_TRY_CTX(cudaFreeAsync(s.staging.release(), s.stream.get()), step);
      void* ptr = nullptr;
      GPUXFER_CUDA_TRY_CTX(cudaMallocAsync(&ptr, plan.staging_bytes, s.stream.get()), step);
      s.staging = std::unique_ptr<std::byte, detail::DeviceFree>(static_cast<std::byte*>(ptr), {s.device});
      s.staging_bytes = plan.staging_bytes;
    }
  }

  [[nodiscard]] std::byte* part(std::size_t r) const { return entry->segment.data() + plan.offset[r]; }

  // Its own bytes down, other nodes' bytes over NCCL on the call's stream, then down, each
  // straight into its part of the segment.
  void queue(const void* send) {
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
    // Whatever happens below, the call's stream ends after the copies down: what follows there (the
    // "done" exchange, the reduction, the release of the segment) waits for them.
    struct Join {
      detail::CommunicatorState& s;
      cudaStream_t stream;
      ~Join() {
        try {
          detail::stream_wait(stream, detail::record_event(s.device, s.down.get()));
        } catch (...) {
          const detail::RelaxedCapture relaxed;
          (void)detail::handled(cudaStreamSynchronize(s.down.get()));
        }
      }
    } join{s, stream};
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

  // The results view the segment (and keep it): after every rank said "done", every part is there; after
  // the stream-ordered form, once the stream gets past the call. The arena hands the segment out again
  // only once that stream is past it and every result is gone.
  [[nodiscard]] std::vector<HostBuffer> results() {
    std::vector<HostBuffer> out(sizes.size());
    for (std::size_t r = 0; r < sizes.size(); ++r) {
      if (sizes[r] > 0) out[r] = detail::host_buffer_view(entry, part(r), static_cast<std::size_t>(sizes[r]));
    }
    detail::release_after_stream(entry, s.device, stream);
    return out;
  }
};

// What both forms share: the checks' context, the first exchanges and this rank's part of the call.
struct Call {
  CommunicatorState& s;
  const void* send;
  std::size_t bytes;
  int root;
  std::string what;
  std::vector<std::uint64_t> sizes{};
  HostGatherPlan plan{};
  std::string name{};  ///< the root's segment for this call
  RootSide side;

  Call(CommunicatorState& state, const void* send_, std::size_t bytes_, int root_, std::string what_,
       cudaStream_t stream)
      : s(state), send(send_), bytes(bytes_), root(root_), what(std::move(what_)),
        side{state, sizes, plan, what, stream, {}} {}

  [[nodiscard]] bool is_root() const { return s.rank == root; }
  [[nodiscard]] HostRoute route() const { return plan.route[static_cast<std::size_t>(s.rank)]; }

  // The sizes (with the root's offer), then the root's "ready" when the offer does not fit. False when
  // nobody sends a byte (nothing more to do).
  bool agree() {
    if (is_root()) side.set_aside();
    const detail::RootOffer offered = is_root() ? side.offer() : detail::RootOffer{};
    const std::uint64_t mine[] = {bytes, offered.segment, offered.segment_bytes, offered.staging_bytes};
    const std::vector<std::uint64_t> words =
        detail::all_gather_words(s, mine, what + " (the exchange of sizes)");
    constexpr std::size_t n = std::size(mine);
    sizes.resize(static_cast<std::size_t>(s.world_size));
    for (std::size_t r = 0; r < sizes.size(); ++r) sizes[r] = words[n * r];
    plan = detail::plan_host_gather(sizes, s.node_leaders, root, detail::gather_page(s.nodes, root));
    if (plan.segment_bytes == 0) {
      side.entry.reset();
      return false;
    }
    const std::size_t at = n * static_cast<std::size_t>(root);
    const detail::RootOffer offer{words[at + 1], words[at + 2], words[at + 3]};
    std::uint64_t id = offer.segment - 1;
    if (!detail::offer_fits(plan, offer)) {
      Outcome ready{s.comm, {}};
      if (is_root()) ready.run([&] { side.prepare(); });
      id = detail::exchange_outcomes_with(s, ready, side.entry ? side.entry->id : 0, root, what, "ready",
                                          "the root's preparation (shared segment, staging)");
    }
    if (is_root()) s.last_gather_segment = plan.segment_bytes;
    name = detail::segment_name(s, root, id);
    return true;
  }

  // A rank of another node: its part in the pieces the root receives, one group each (network_piece), so
  // that the root takes each down as the next arrives.
  void send_pieces(cudaStream_t stream) {
    const std::size_t piece = detail::network_piece(bytes);
    const auto* from = static_cast<const std::byte*>(send);
    for (std::size_t begin = 0; begin < bytes; begin += piece) {
      const std::size_t length = std::min(piece, bytes - begin);
      detail::launch(s, stream, what, rank_text(root),
                     [&] { return ncclSend(from + begin, length, ncclUint8, root, s.comm.get(), stream); });
    }
  }
};

std::string call_text(std::size_t bytes, int root) {
  return "gather_to_host of " + detail::bytes_text(bytes) + " to " + rank_text(root);
}

}  // namespace

std::vector<HostBuffer> Communicator::gather_to_host(const void* send, std::size_t bytes, int root) {
  CommunicatorState& s = *state_;
  detail::DeviceGuard guard(s.device);
  Call call(s, send, bytes, root, call_text(bytes, root), s.stream.get());
  detail::check_rank(s, root, "root", call.what);
  s.comm.check_usable(call.what);
  detail::check_buffer(s, send, bytes, "send", call.what);
  // After the legacy default stream's work, as the other blocking forms.
  detail::stream_wait(s.stream.get(), detail::record_event(s.device, cudaStreamLegacy));
  detail::know_nodes(s, call.what);
  if (!call.agree()) return call.is_root() ? std::vector<HostBuffer>(call.sizes.size()) : std::vector<HostBuffer>{};

  const auto me = static_cast<std::size_t>(s.rank);
  Outcome done{s.comm, {}};
  if (call.is_root()) {
    done.run([&] { call.side.queue(send); });
  } else if (call.route() == HostRoute::segment && bytes > 0) {
    done.run([&] {
      detail::copy_with_segment(s, call.name, call.plan.offset[me], bytes, send, nullptr, root, call.what);
    });
  } else if (call.route() == HostRoute::network && bytes > 0) {
    done.run([&] { call.send_pieces(s.stream.get()); });
  }
  // Queued after this rank's copies: when the root has every rank's "done", every byte is in place (and
  // the exchange is the communicator's last operation, s.last).
  const bool over_nccl =
      call.is_root() ? call.plan.staging_bytes > 0 : call.route() == HostRoute::network && bytes > 0;
  detail::end_blocking(s, done, over_nccl, call.what, "writing a part");
  return call.is_root() ? call.side.results() : std::vector<HostBuffer>{};
}

std::vector<HostBuffer> Communicator::gather_to_host_async(const void* send, std::size_t bytes, int root,
                                                           cudaStream_t stream) {
  CommunicatorState& s = *state_;
  detail::DeviceGuard guard(s.device);
  Call call(s, send, bytes, root, call_text(bytes, root) + " (stream-ordered)", stream);
  detail::check_rank(s, root, "root", call.what);
  detail::check_buffer(s, send, bytes, "send", call.what);
  detail::check_stream(s, stream, call.what, "its exchanges with the other ranks wait on the host");
  detail::know_nodes(s, call.what);
  // The exchanges run on the communicator's stream, which does not wait for the caller's: the host waits
  // for them, never for the work queued before the call.
  if (!call.agree()) return call.is_root() ? std::vector<HostBuffer>(call.sizes.size()) : std::vector<HostBuffer>{};

  // After the communicator's earlier operations, on the GPU.
  detail::stream_wait(stream, s.last);
  const auto me = static_cast<std::size_t>(s.rank);
  Outcome queued{s.comm, {}};
  if (call.route() == HostRoute::segment && bytes > 0) {
    queued.run([&] {
      detail::queue_with_segment(s, call.name, call.plan.offset[me], bytes, send, nullptr, stream, call.what);
    });
  }
  // Before any NCCL work on the caller's stream: when a rank could not queue its copy, every rank knows
  // it here and queues no NCCL work but the reduction, which still ends the copies the others queued (the
  // root's segment goes back, and this rank's mapping is released, only after them); then every rank throws.
  const std::optional<Error> failed =
      detail::exchange_outcomes_failure(s, queued, call.what, "queued", "queueing a copy into the root's segment");
  detail::end_stream_ordered(s, stream, root, call.what, failed, [&] {
    if (call.is_root()) {
      call.side.queue(send);
    } else if (call.route() == HostRoute::network && bytes > 0) {
      call.send_pieces(stream);
    }
  });
  return call.is_root() ? call.side.results() : std::vector<HostBuffer>{};
}

}  // namespace gpuxfer
