#include "hostops/host_transfer.hpp"

#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#include <nccl.h>

#include <gpuxfer/host_buffer.hpp>
#include <gpuxfer/options.hpp>

#include "communicator/comm_launch.hpp"
#include "hostops/host_gather_plan.hpp"
#include "hostops/shared_segment.hpp"
#include "memory/pool_state.hpp"
#include "runtime/capture_mode.hpp"
#include "runtime/log.hpp"

namespace gpuxfer::detail {
namespace {

std::atomic<std::uint64_t> communicators_in_process{0};

// One per communicator: random (random_device), with a count of this process's communicators mixed in
// should random_device be deterministic.
std::uint64_t make_nonce() {
  std::random_device device;
  const std::uint64_t random = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  return random ^ (++communicators_in_process * 0x9E3779B97F4A7C15ull);
}

}  // namespace

PinnedPool& pool_of(CommunicatorState& s) {
  if (!s.pool) {
    s.pool = std::make_unique<PinnedPool>(std::numeric_limits<std::size_t>::max());
    PoolState::of(*s.pool).device = s.device;
  }
  return *s.pool;
}

HostCopyWorkers& host_copy_of(CommunicatorState& s) {
  if (!s.host_copy) s.host_copy = std::make_unique<HostCopyWorkers>(default_host_threads());
  return *s.host_copy;
}

void know_nodes(CommunicatorState& s, const std::string& what) {
  if (!s.node_leaders.empty()) return;
  if (s.world_size == 1) {  // nobody to tell
    s.nodes = {local_node_record(make_nonce(), s.node_id)};
    s.node_leaders = node_leaders(s.nodes);
    return;
  }
  const std::size_t record = sizeof(NodeRecord);
  const std::size_t all = record * static_cast<std::size_t>(s.world_size);
  HostBuffer host = pool_of(s).acquire(all);
  const NodeRecord mine = local_node_record(make_nonce(), s.node_id);
  std::memcpy(host.data() + record * static_cast<std::size_t>(s.rank), &mine, record);
  void* ptr = nullptr;
  const std::string step = what + " (the exchange of node identities)";
  {
    const RelaxedCapture relaxed;
    GPUXFER_CUDA_TRY_CTX(cudaMalloc(&ptr, all), s.where + ": " + step);
  }
  const std::unique_ptr<std::byte, DeviceFree> device(static_cast<std::byte*>(ptr), {s.device});
  std::byte* slot = device.get() + record * static_cast<std::size_t>(s.rank);
  const cudaStream_t stream = s.stream.get();
  GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(slot, host.data() + record * static_cast<std::size_t>(s.rank), record,
                                       cudaMemcpyHostToDevice, stream),
                       s.where + ": " + step);
  launch(s, stream, step, other_ranks(s.rank, s.world_size),
         [&] { return ncclAllGather(slot, device.get(), record, ncclUint8, s.comm.get(), stream); });
  GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(host.data(), device.get(), all, cudaMemcpyDeviceToHost, stream),
                       s.where + ": " + step);
  const SharedEvent done = record_event(s.device, stream);
  s.comm.wait(*done, step, other_ranks(s.rank, s.world_size));
  s.last = done;
  std::vector<NodeRecord> nodes(static_cast<std::size_t>(s.world_size));
  std::memcpy(nodes.data(), host.data(), all);
  s.node_leaders = node_leaders(nodes);
  s.nodes = std::move(nodes);
  GPUXFER_LOG(info, s.where + ": on node '" + identity_text(mine) + "', with the node of rank " +
                        std::to_string(s.node_leaders[static_cast<std::size_t>(s.rank)]));
}

namespace {

// The exchange of (status, word or code) pairs, and the error every rank would throw: this rank's own
// failure, else Error(Errc::comm_error) naming the ranks that failed; none when every rank's step went well.
std::optional<Error> exchange_and_judge(CommunicatorState& s, const Outcome& mine, std::uint64_t word,
                                        const std::string& what, const std::string& exchange,
                                        const std::string& step, std::vector<std::uint64_t>& pairs) {
  const std::uint64_t second = mine.failure ? mine.code() : word;
  pairs = all_gather_pairs(s, mine.status(), second, what + " (" + exchange + ")");
  if (mine.failure) return mine.failure;
  std::string failed;
  for (int r = 0; r < s.world_size; ++r) {
    if (pairs[2 * static_cast<std::size_t>(r)] == 0) continue;
    const auto code = static_cast<Errc>(pairs[2 * static_cast<std::size_t>(r) + 1]);
    failed += (failed.empty() ? "" : ", ") + rank_text(r) + " (" + std::string(to_string(code)) + ")";
  }
  if (failed.empty()) return std::nullopt;
  return Error(Errc::comm_error,
               s.where + ": " + what + ": " + step + " failed on " + failed + "; that rank's own error says why");
}

}  // namespace

std::uint64_t exchange_outcomes_with(CommunicatorState& s, const Outcome& mine, std::uint64_t word, int from,
                                     const std::string& what, const std::string& exchange,
                                     const std::string& step) {
  std::vector<std::uint64_t> pairs;
  if (auto failure = exchange_and_judge(s, mine, word, what, exchange, step, pairs)) throw *failure;
  return pairs[2 * static_cast<std::size_t>(from) + 1];
}

void exchange_outcomes(CommunicatorState& s, const Outcome& mine, const std::string& what,
                       const std::string& exchange, const std::string& step) {
  (void)exchange_outcomes_with(s, mine, 0, s.rank, what, exchange, step);
}

void end_blocking(CommunicatorState& s, const Outcome& done, bool over_nccl, const std::string& what,
                  const std::string& step) {
  if (done.failure && over_nccl) {
    s.comm.abort();
    throw *done.failure;
  }
  exchange_outcomes(s, done, what, "done", step);
}

std::optional<Error> exchange_outcomes_failure(CommunicatorState& s, const Outcome& mine, const std::string& what,
                                               const std::string& exchange, const std::string& step) {
  std::vector<std::uint64_t> pairs;
  return exchange_and_judge(s, mine, 0, what, exchange, step, pairs);
}

std::string segment_name(const CommunicatorState& s, int root, std::uint64_t id) {
  const NodeRecord& node = s.nodes[static_cast<std::size_t>(root)];
  return shared_segment_name(node.pid, node.nonce, id);
}

void queue_with_segment(CommunicatorState& s, const std::string& name, std::size_t offset, std::size_t bytes,
                        const void* from_device, void* to_device, cudaStream_t stream, const std::string& what) {
  const std::string where = s.where + ": " + what + ": " + name + " from byte " + std::to_string(offset);
  SegmentMappings::Mapping& mapping = s.mappings.get(name, s.device, where, s.timeout);
  const RegisteredSegment& segment = *mapping.segment;
  if (segment.size() < offset + bytes) {
    throw Error(Errc::comm_error, where + ": the segment holds only " + std::to_string(segment.size()) +
                                      " bytes, not " + std::to_string(offset + bytes) +
                                      " (do the ranks agree on the sizes?)");
  }
  std::byte* part = segment.data() + offset;
  // Recorded whatever happens: a copy that CUDA took may be queued even when a later call fails.
  struct After {
    SegmentMappings::Mapping& mapping;
    int device;
    cudaStream_t stream;
    ~After() { mapping.after = record_event_or_wait(device, stream); }
  } after{mapping, s.device, stream};
  if (from_device != nullptr) {
    GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(part, from_device, bytes, cudaMemcpyDeviceToHost, stream), where);
  } else {
    GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(to_device, part, bytes, cudaMemcpyHostToDevice, stream), where);
  }
}

void copy_with_segment(CommunicatorState& s, const std::string& name, std::size_t offset, std::size_t bytes,
                       const void* from_device, void* to_device, int root, const std::string& what) {
  queue_with_segment(s, name, offset, bytes, from_device, to_device, s.stream.get(), what);
  s.comm.wait(*record_event(s.device, s.stream.get()), what, rank_text(root));
}

void reduce_to_root(CommunicatorState& s, cudaStream_t stream, int root, const std::string& what) {
  if (s.world_size == 1) return;
  std::uint64_t* words = s.reduction_words_device();
  const std::string peers = s.rank == root ? other_ranks(s.rank, s.world_size) : rank_text(root);
  launch(s, stream, what + " (the end on every rank's stream)", peers, [&] {
    return ncclReduce(words, words + 1, 1, ncclUint64, ncclSum, root, s.comm.get(), stream);
  });
}

void give_back_after_stream(CommunicatorState& s, cudaStream_t stream, std::span<HostBuffer> buffers) noexcept {
  const SharedEvent after = record_event_or_wait(s.device, stream);
  for (HostBuffer& buffer : buffers) {
    if (after) release_after(std::move(buffer), after);
  }
}

}  // namespace gpuxfer::detail
