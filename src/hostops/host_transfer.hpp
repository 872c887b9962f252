// What the Communicator's host operations (gather_to_host, broadcast_from_host) share: the pool of pinned
// host memory, the ranks' node records (exchanged once), the outcome of one rank's step kept until the
// ranks have told each other how theirs went, and a node rank's copy through the root's shared segment
// (its cached mapping).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include <cuda_runtime_api.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/host_buffer.hpp>
#include <gpuxfer/pinned_pool.hpp>

#include "communicator/communicator_state.hpp"

namespace gpuxfer::detail {

inline std::string rank_text(int rank) { return "rank " + std::to_string(rank); }

/// The communicator's pool of pinned host memory, made on first use (no limit of its own: its buffers
/// may be the caller's, held as long as it likes).
PinnedPool& pool_of(CommunicatorState& s);
/// The communicator's host copy threads (default_host_threads() of them), made on first use: the root's
/// copy of its bytes into pinned or shared memory runs at the host's memory speed, not one thread's.
HostCopyWorkers& host_copy_of(CommunicatorState& s);

/// The ranks' node records and node leaders, exchanged once (an ncclAllGather of 256 bytes a rank) when
/// the communicator is made (the host operations call it too, and find them known); @p what names the
/// step in messages.
void know_nodes(CommunicatorState& s, const std::string& what);

/// A failure of this rank's own step, kept until the ranks have told each other how their step went.
/// Not kept once the communicator is aborted: no exchange can follow then.
struct Outcome {
  const NcclComm& comm;
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
    } catch (const std::system_error& e) {  // a thread the host copies could not start, say
      failure = Error(Errc::out_of_memory, std::string("out of host resources: ") + e.what());
    } catch (const std::exception& e) {
      failure = Error(Errc::comm_error, std::string("an unexpected failure: ") + e.what());
    }
  }
  [[nodiscard]] std::uint64_t status() const { return failure ? 1 : 0; }
  [[nodiscard]] std::uint64_t code() const {
    return failure ? static_cast<std::uint64_t>(failure->code()) : 0;
  }
};

/// Every rank's outcome of @p step, exchanged (all_gather_pairs of (status, code), named "<what>
/// (<exchange>)"). Throws this rank's own failure first, else Error(Errc::comm_error) naming the ranks that
/// failed; returns when every rank's step went well.
void exchange_outcomes(CommunicatorState& s, const Outcome& mine, const std::string& what,
                       const std::string& exchange, const std::string& step);

/// The "done" exchange of a blocking host operation (exchange_outcomes), unless this rank's step failed
/// when it had NCCL sends or receives of the path between nodes to queue (@p over_nccl): part of them may
/// be queued, the peers' matching work waits for the rest, and the exchange would queue behind it until
/// the timeout on every rank. Then it aborts the communicator and throws this rank's own failure; the
/// peers' bounded waits fail.
void end_blocking(CommunicatorState& s, const Outcome& done, bool over_nccl, const std::string& what,
                  const std::string& step);

/// As exchange_outcomes, but returns the error instead of throwing it (none when every rank's step went
/// well), for a call that must still end what it queued, on every rank alike, before it throws. Throws
/// only when the exchange itself fails.
[[nodiscard]] std::optional<Error> exchange_outcomes_failure(CommunicatorState& s, const Outcome& mine,
                                                             const std::string& what, const std::string& exchange,
                                                             const std::string& step);

/// As exchange_outcomes, where a rank whose step went well sends @p word in place of the code (the root's
/// "ready" carries the id of its shared segment that way): returns @p from's word to every rank.
std::uint64_t exchange_outcomes_with(CommunicatorState& s, const Outcome& mine, std::uint64_t word, int from,
                                     const std::string& what, const std::string& exchange,
                                     const std::string& step);

/// The name of @p root's shared segment @p id (from the root's node record).
[[nodiscard]] std::string segment_name(const CommunicatorState& s, int root, std::uint64_t id);

/// A rank of the root's node: queues on @p stream a copy of @p bytes from @p from_device into bytes
/// [offset, offset + bytes) of the root's shared segment @p name, or (@p from_device null) from there into
/// @p to_device (device memory of this rank's device), through this rank's cached mapping of the whole
/// segment (mapped and page-locked on the first call that names it, kept at least until @p stream is past
/// the copy).
/// @throws Error(Errc::comm_error) when the segment is missing or short; Error(Errc::cuda_error /
///         out_of_memory) for a failed CUDA call or mapping
void queue_with_segment(CommunicatorState& s, const std::string& name, std::size_t offset, std::size_t bytes,
                        const void* from_device, void* to_device, cudaStream_t stream, const std::string& what);

/// queue_with_segment on the communicator's stream, then a wait for it (bounded by the timeout; @p root
/// is named should it fail). @throws as queue_with_segment, and Error(Errc::comm_error) when the wait fails
void copy_with_segment(CommunicatorState& s, const std::string& name, std::size_t offset, std::size_t bytes,
                       const void* from_device, void* to_device, int root, const std::string& what);

/// The stream-ordered host operations' end on @p stream: every rank's one-word ncclReduce to @p root, in
/// the communicator's order. The root's reduction completes only once every rank has sent its word, that
/// is once each rank's @p stream is past what the call queued there before: the root's stream then waits,
/// on the GPU, for the other ranks' copies into or out of its segment. Nothing in a world of one.
void reduce_to_root(CommunicatorState& s, cudaStream_t stream, int root, const std::string& what);

/// The end of a stream-ordered host operation on @p stream, once the "queued" exchange said @p failed (the
/// same on every rank): unless it failed, @p work queues this rank's NCCL work there; then reduce_to_root
/// on every rank alike, which ends whatever the ranks queued; then the communicator's order moves on to
/// @p stream and @p failed is thrown. A failure while queueing aborts the communicator first: the peers'
/// queued work waits for this rank's, and aborted, it ends.
template <class Work>
void end_stream_ordered(CommunicatorState& s, cudaStream_t stream, int root, const std::string& what,
                        const std::optional<Error>& failed, Work&& work) {
  try {
    if (!failed) work();
    reduce_to_root(s, stream, root, what);
  } catch (...) {
    s.comm.abort();
    throw;
  }
  s.last = record_event_or_wait(s.device, stream);
  if (failed) throw *failed;
}

/// Gives @p buffers back to their pool once @p stream is past the copies queued on them (a stream-ordered
/// call's, or a failed one's). Never throws.
void give_back_after_stream(CommunicatorState& s, cudaStream_t stream, std::span<HostBuffer> buffers) noexcept;

}  // namespace gpuxfer::detail
