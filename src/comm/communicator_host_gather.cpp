// Communicator::gather_to_host: every rank's device bytes into HostBuffers on the root, each rank over its
// own PCIe link where it can. The ranks of the root's node copy from their GPUs straight into a POSIX
// shared segment that the root made (each page-locks its own part); the ranks of other nodes send over
// NCCL to the root's GPU, which copies them down. Exchanges of two words a rank order it: the sizes, the
// root's "ready" (buffers, segment and staging made, or why not) and every rank's "done" (its part
// written, or why not), so that a failure on one rank makes every rank throw instead of wait.
#include <gpuxfer/communicator.hpp>

#include <atomic>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nccl.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/host_buffer.hpp>

#include "comm/comm_launch.hpp"
#include "comm/shared_segment.hpp"
#include "memory/pool_state.hpp"
#include "runtime/log.hpp"

namespace gpuxfer {
namespace {

using detail::CommunicatorState;
using detail::HostGatherPlan;
using detail::HostRoute;

std::atomic<std::uint64_t> communicators_in_process{0};

// One per communicator: random (random_device), with a count of this process's communicators mixed in
// should random_device be deterministic.
std::uint64_t make_nonce() {
  std::random_device device;
  const std::uint64_t random = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  return random ^ (++communicators_in_process * 0x9E3779B97F4A7C15ull);
}

std::string rank_text(int rank) { return "rank " + std::to_string(rank); }

PinnedPool& pool_of(CommunicatorState& s) {
  if (!s.pool) {
    // No limit of its own: the HostBuffers are the caller's, held as long as it likes.
    s.pool = std::make_unique<PinnedPool>(std::numeric_limits<std::size_t>::max());
    detail::PoolState::of(*s.pool).device = s.device;
  }
  return *s.pool;
}

// The ranks' node records, exchanged once (an ncclAllGather of 256 bytes a rank).
void know_nodes(CommunicatorState& s, const std::string& what) {
  if (!s.node_leaders.empty()) return;
  const std::size_t record = sizeof(detail::NodeRecord);
  const std::size_t all = record * static_cast<std::size_t>(s.world_size);
  HostBuffer host = pool_of(s).acquire(all);
  const detail::NodeRecord mine = detail::local_node_record(make_nonce(), s.node_id);
  std::memcpy(host.data() + record * static_cast<std::size_t>(s.rank), &mine, record);
  void* ptr = nullptr;
  const std::string step = what + " (the exchange of node identities)";
  GPUXFER_CUDA_TRY_CTX(cudaMalloc(&ptr, all), s.where + ": " + step);
  const std::unique_ptr<std::byte, detail::DeviceFree> device(static_cast<std::byte*>(ptr), {s.device});
  std::byte* slot = device.get() + record * static_cast<std::size_t>(s.rank);
  const cudaStream_t stream = s.stream.get();
  GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(slot, host.data() + record * static_cast<std::size_t>(s.rank), record,
                                       cudaMemcpyHostToDevice, stream),
                       s.where + ": " + step);
  detail::launch(s, stream, step, detail::other_ranks(s.rank, s.world_size),
                 [&] { return ncclAllGather(slot, device.get(), record, ncclUint8, s.comm.get(), stream); });
  GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(host.data(), device.get(), all, cudaMemcpyDeviceToHost, stream),
                       s.where + ": " + step);
  const detail::SharedEvent done = detail::record_event(s.device, stream);
  s.comm.wait(*done, step, detail::other_ranks(s.rank, s.world_size));
  s.last = done;
  std::vector<detail::NodeRecord> nodes(static_cast<std::size_t>(s.world_size));
  std::memcpy(nodes.data(), host.data(), all);
  s.node_leaders = detail::node_leaders(nodes);
  s.nodes = std::move(nodes);
  GPUXFER_LOG(info, s.where + ": on node '" + detail::identity_text(mine) + "', with the node of rank " +
                        std::to_string(s.node_leaders[static_cast<std::size_t>(s.rank)]));
}

// A failure of this rank's own step, kept until the ranks have told each other how their step went.
// Not kept once the communicator is aborted: no exchange can follow then.
struct Outcome {
  const detail::NcclComm& comm;
  std::optional<Error> failure;
  template <class Step>
  void run(Step&& step) {
    try {
      step();
    } catch (const Error& e) {
      if (!comm.usable()) throw;
      failure = e;
    } catch (const std::bad_alloc&) {
      failure = Error(Errc::out_of_memory, "out of host memory");
    }
  }
  [[nodiscard]] std::uint64_t status() const { return failure ? 1 : 0; }
  [[nodiscard]] std::uint64_t code() const {
    return failure ? static_cast<std::uint64_t>(failure->code()) : 0;
  }
};

// After an exchange of (status, code): this rank's own failure first, else the others', named.
void throw_on_failures(const CommunicatorState& s, const Outcome& mine,
                       const std::vector<std::uint64_t>& pairs, const std::string& what,
                       const std::string& step) {
  if (mine.failure) throw *mine.failure;
  std::string failed;
  for (int r = 0; r < s.world_size; ++r) {
    if (pairs[2 * static_cast<std::size_t>(r)] == 0) continue;
    const auto code = static_cast<Errc>(pairs[2 * static_cast<std::size_t>(r) + 1]);
    failed += (failed.empty() ? "" : ", ") + rank_text(r) + " (" + std::string(to_string(code)) + ")";
  }
  if (!failed.empty()) {
    throw Error(Errc::comm_error, s.where + ": " + what + ": " + step + " failed on " + failed +
                                      "; that rank's own error says why");
  }
}

// Page-locks a rank's part of the segment for its GPU's copy; undone (after the stream is idle, so that
// no copy still runs into it) on every path.
class Registration {
 public:
  Registration(void* ptr, std::size_t bytes, cudaStream_t stream, const std::string& where)
      : stream_(stream) {
    GPUXFER_CUDA_TRY_CTX(cudaHostRegister(ptr, bytes, cudaHostRegisterPortable), where);
    ptr_ = ptr;
  }
  ~Registration() {
    (void)cudaStreamSynchronize(stream_);  // only this call's copy can be queued on it: bounded
    (void)cudaHostUnregister(ptr_);
  }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

 private:
  cudaStream_t stream_;
  void* ptr_ = nullptr;
};

// A rank of the root's node: its bytes from its GPU into its own part of the root's segment.
void write_part(CommunicatorState& s, const void* send, std::size_t bytes, std::size_t offset,
                const std::string& name, int root, const std::string& what) {
  detail::SharedSegment part = detail::SharedSegment::open(name, offset, bytes);
  const std::string where = s.where + ": " + what + ": its part of " + name;
  const Registration registration(part.data(), bytes, s.stream.get(), where);
  GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(part.data(), send, bytes, cudaMemcpyDeviceToHost, s.stream.get()),
                       where);
  s.comm.wait(*detail::record_event(s.device, s.stream.get()), what, rank_text(root));
}

// Gives the root's buffers back once the GPU's copies into them are over (a failure left them queued).
void give_back_after_stream(CommunicatorState& s, std::vector<HostBuffer>& out) noexcept {
  detail::SharedEvent after;
  try {
    after = detail::record_event(s.device, s.stream.get());
  } catch (...) {
    (void)cudaStreamSynchronize(s.stream.get());
  }
  for (HostBuffer& buffer : out) {
    if (after) detail::release_after(std::move(buffer), after);
  }
}

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
  know_nodes(s, what);
  const std::vector<std::uint64_t> pairs =
      detail::all_gather_pairs(s, bytes, 0, what + " (the exchange of sizes)");
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(s.world_size));
  for (std::size_t r = 0; r < sizes.size(); ++r) sizes[r] = pairs[2 * r];
  const HostGatherPlan plan = detail::plan_host_gather(sizes, s.node_leaders, root, detail::page_size());
  const std::uint64_t call = s.host_gathers++;
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
  throw_on_failures(s, ready, detail::all_gather_pairs(s, ready.status(), ready.code(), what + " (ready)"),
                    what, ready_step);

  const auto me = static_cast<std::size_t>(s.rank);
  Outcome done{s.comm, {}};
  try {
    if (is_root) {
      done.run([&] { side.queue(send); });
    } else if (plan.route[me] == HostRoute::segment && bytes > 0) {
      done.run([&] { write_part(s, send, bytes, plan.offset[me], name, root, what); });
    } else if (plan.route[me] == HostRoute::network && bytes > 0) {
      const cudaStream_t stream = s.stream.get();
      done.run([&] {
        detail::launch(s, stream, what, rank_text(root),
                       [&] { return ncclSend(send, bytes, ncclUint8, root, s.comm.get(), stream); });
      });
    }
    // Queued after this rank's copies: when the root has every rank's "done", every byte is in place.
    throw_on_failures(s, done, detail::all_gather_pairs(s, done.status(), done.code(), what + " (done)"),
                      what, "writing a part");
    if (is_root) side.collect();
  } catch (...) {
    give_back_after_stream(s, side.out);
    throw;
  }
  s.last = detail::record_event(s.device, s.stream.get());
  return is_root ? std::move(side.out) : std::vector<HostBuffer>{};
}

}  // namespace gpuxfer
