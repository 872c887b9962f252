// Communicator::broadcast_from_host(_async): the root's host bytes into every rank's device memory, each
// rank of the root's node over its own PCIe link. The root writes the bytes once into a POSIX shared
// segment of its arena (reused from call to call, page-locked once), which every other rank of its node
// copies into its GPU through a mapping it keeps; the root copies them into its own GPU, and from there
// over NCCL to the ranks of other nodes. The root prepares before the first exchange (it alone knows the
// size), so exchanges of a few words a rank order it: the root's size, its preparation's outcome and the
// segment's id, with every rank's capacity; then every rank's "done" (its bytes in place, or why not) for
// the blocking form, or "queued" (its copy queued, or why not) before the NCCL work and a reduction to the
// root on the caller's stream for the stream-ordered one. So a failure on one rank makes every rank throw
// instead of wait.
#include <gpuxfer/communicator.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nccl.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/host_buffer.hpp>

#include "communicator/comm_launch.hpp"
#include "hostops/host_transfer.hpp"
#include "hostops/segment_arena.hpp"
#include "memory/host_memory.hpp"

namespace gpuxfer {
namespace {

using detail::CommunicatorState;
using detail::HostBroadcastPlan;
using detail::HostRoute;
using detail::Outcome;
using detail::rank_text;

// The root: the bytes written into a segment of its arena (or into pinned memory) before the first
// exchange, then its own copy and NCCL's sends to other nodes.
struct RootSide {
  CommunicatorState& s;
  std::span<const std::byte> data;
  const std::string& what;
  cudaStream_t stream;  ///< where the call's copies and sends go: the communicator's, or the caller's
  std::shared_ptr<detail::ArenaEntry> entry;
  HostBuffer staged;  ///< pinned copy of pageable data, when there is no segment to copy from
  const std::byte* source = nullptr;  ///< what the root's own copy reads

  // The call's copies may still be queued (a stream-ordered call's, or a failed one's): the staging and
  // the segment go back after them.
  ~RootSide() {
    if (!staged.empty()) detail::give_back_after_stream(s, stream, std::span(&staged, 1));
    detail::release_after_stream(entry, s.device, stream);
  }

  // The bytes where the copies read them. The root's own copy reads page-locked memory: the segment
  // (page-locked once, in the arena) when other ranks of its node take the bytes, the caller's data when
  // all of it is page-locked, else pinned memory of the pool. A copy from pageable memory would
  // synchronise the stream on the host, a wait no timeout bounds.
  void prepare(bool segment) {
    source = data.data();
    if (segment) {
      const detail::NodeRecord& me = s.nodes[static_cast<std::size_t>(s.rank)];
      entry = s.arena.acquire(data.size(), me.pid, me.nonce, s.device, s.where + ": " + what, s.timeout);
      detail::host_copy_of(s).copy(entry->segment.data(), data.data(), data.size());
      source = entry->segment.data();
    } else if (!detail::is_pinned_range(data.data(), data.size())) {
      staged = detail::pool_of(s).acquire(data.size());
      detail::host_copy_of(s).copy(staged.data(), data.data(), data.size());
      source = staged.data();
    }
  }

  // Its own copy, then its recv to every rank of another node (same stream: after the copy).
  void queue(void* recv, const HostBroadcastPlan& plan) {
    // No copy of nothing: CUDA takes a null or pageable source of 0 bytes as pageable memory, whose copy
    // waits on the host for the stream's earlier work.
    if (!data.empty()) {
      GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(recv, source, data.size(), cudaMemcpyHostToDevice, stream),
                           s.where + ": " + what + ": its own copy");
    }
    if (!plan.network) return;
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

// What both forms share: the root's preparation and the first exchange, which every rank's plan follows.
struct Call {
  CommunicatorState& s;
  std::span<const std::byte> data;
  void* recv;
  std::size_t capacity;
  int root;
  std::string what;
  cudaStream_t stream;
  HostBroadcastPlan plan{};
  std::uint64_t bytes = 0;  ///< the root's
  std::string name{};       ///< the root's segment, when other ranks of its node take the bytes
  RootSide side;

  Call(CommunicatorState& state, std::span<const std::byte> data_, void* recv_, std::size_t capacity_, int root_,
       std::string what_, cudaStream_t stream_)
      : s(state), data(data_), recv(recv_), capacity(capacity_), root(root_), what(std::move(what_)),
        stream(stream_), side{state, data_, what, stream_, {}, {}} {}

  [[nodiscard]] bool is_root() const { return s.rank == root; }
  [[nodiscard]] HostRoute route() const { return plan.route[static_cast<std::size_t>(s.rank)]; }

  void check_arguments() {
    detail::check_rank(s, root, "root", what);
    // A null recv is refused in agree(), on every rank, when the root has bytes for it.
    if (recv != nullptr) detail::check_buffer(s, recv, capacity, "recv", what);
  }

  // The root prepares; then every rank's (size, capacity) and the root's outcome with the segment's id.
  // False for 0 bytes (nothing more to do). @throws on every rank alike: the root's failure (its own
  // error there, Errc::comm_error naming it elsewhere), a recv too small or null (invalid_argument)
  bool agree() {
    Outcome ready{s.comm, {}};
    if (is_root() && !data.empty()) {
      const std::vector<HostRoute> routes = detail::host_routes(s.node_leaders, root, what);
      const bool segment = std::count(routes.begin(), routes.end(), HostRoute::segment) > 0;
      ready.run([&] { side.prepare(segment); });
    }
    const std::uint64_t mine[] = {is_root() ? data.size() : 0, recv != nullptr ? capacity : 0, ready.status(),
                                  ready.failure ? ready.code() : (side.entry ? side.entry->id : 0)};
    constexpr std::size_t n = std::size(mine);
    const std::vector<std::uint64_t> words = detail::all_gather_words(s, mine, what + " (the exchange of sizes)");
    const std::size_t at = n * static_cast<std::size_t>(root);
    if (ready.failure) throw *ready.failure;
    if (words[at + 2] != 0) {
      throw Error(Errc::comm_error, s.where + ": " + what + ": the root's preparation (shared segment, pinned "
                                        "copy) failed on " + rank_text(root) + " (" +
                                        std::string(to_string(static_cast<Errc>(words[at + 3]))) +
                                        "); that rank's own error says why");
    }
    bytes = words[at];
    if (recv == nullptr && bytes > 0) {
      throw Error(Errc::invalid_argument,
                  s.where + ": " + what + ": recv is null for the root's " + detail::bytes_text(bytes));
    }
    std::vector<std::uint64_t> capacities(static_cast<std::size_t>(s.world_size));
    for (std::size_t r = 0; r < capacities.size(); ++r) capacities[r] = words[n * r + 1];
    plan = detail::plan_host_broadcast(bytes, capacities, s.node_leaders, root, s.where + ": " + what);
    if (bytes == 0) return false;
    if (plan.segment_bytes > 0) name = detail::segment_name(s, root, words[at + 3]);
    return true;
  }

  // This rank's bytes over NCCL from the root's GPU (a rank of another node).
  void receive() {
    detail::launch(s, stream, what, rank_text(root),
                   [&] { return ncclRecv(recv, static_cast<std::size_t>(bytes), ncclUint8, root, s.comm.get(), stream); });
  }
};

std::string call_text(int root) { return "broadcast_from_host from " + rank_text(root); }

}  // namespace

void Communicator::broadcast_from_host(std::span<const std::byte> data, void* recv, std::size_t capacity,
                                       int root) {
  CommunicatorState& s = *state_;
  detail::DeviceGuard guard(s.device);
  Call call(s, data, recv, capacity, root, call_text(root), s.stream.get());
  call.check_arguments();
  s.comm.check_usable(call.what);
  // After the legacy default stream's work, as the other blocking forms, the root's reads of data on the
  // host too (a copy into data queued there, say): it waits for that work before it prepares.
  detail::stream_wait(s.stream.get(), detail::record_event(s.device, cudaStreamLegacy));
  detail::know_nodes(s, call.what);
  if (call.is_root() && !data.empty()) {
    s.comm.wait(*detail::record_event(s.device, s.stream.get()), call.what + " (the legacy default stream's work)",
                detail::other_ranks(s.rank, s.world_size), "the work queued on the legacy default stream holds it up");
  }
  if (!call.agree()) return;

  Outcome done{s.comm, {}};
  if (call.is_root()) {
    done.run([&] { call.side.queue(recv, call.plan); });
  } else if (call.route() == HostRoute::segment) {
    done.run([&] {
      detail::copy_with_segment(s, call.name, 0, static_cast<std::size_t>(call.bytes), nullptr, recv, root,
                                call.what);
    });
  } else {
    done.run([&] { call.receive(); });
  }
  // Queued after this rank's copies: when it completes, this rank's recv holds the bytes (and the root's
  // sends are over), so the segment may serve another call.
  const bool over_nccl = call.is_root() ? call.plan.network : call.route() == HostRoute::network;
  detail::end_blocking(s, done, over_nccl, call.what, "taking the bytes");
}

void Communicator::broadcast_from_host_async(std::span<const std::byte> data, void* recv, std::size_t capacity,
                                             int root, cudaStream_t stream) {
  CommunicatorState& s = *state_;
  detail::DeviceGuard guard(s.device);
  Call call(s, data, recv, capacity, root, call_text(root) + " (stream-ordered)", stream);
  call.check_arguments();
  detail::check_stream(s, stream, call.what, "its exchanges with the other ranks wait on the host");
  detail::know_nodes(s, call.what);
  // The exchanges run on the communicator's stream, which does not wait for the caller's: the host waits
  // for them, never for the work queued before the call.
  if (!call.agree()) return;

  // After the communicator's earlier operations, on the GPU.
  detail::stream_wait(stream, s.last);
  Outcome queued{s.comm, {}};
  if (call.route() == HostRoute::segment) {
    queued.run([&] {
      detail::queue_with_segment(s, call.name, 0, static_cast<std::size_t>(call.bytes), nullptr, recv, stream,
                                 call.what);
    });
  }
  // Before any NCCL work on the caller's stream: when a rank could not queue its copy, every rank knows
  // it here and queues no NCCL work but the reduction, which still ends the copies the others queued; then
  // every rank throws.
  const std::optional<Error> failed = detail::exchange_outcomes_failure(s, queued, call.what, "queued",
                                                                        "queueing a copy out of the root's segment");
  // The root's stream then waits for every rank's copy out of its segment: the segment (and the staging)
  // go back to the arena (the pool) only once the root's stream is past them.
  detail::end_stream_ordered(s, stream, root, call.what, failed, [&] {
    if (call.is_root()) {
      call.side.queue(recv, call.plan);
    } else if (call.route() == HostRoute::network) {
      call.receive();
    }
  });
}

}  // namespace gpuxfer
