// What every operation of a Communicator does first and last: the checks of its arguments and stream,
// the launch of one NCCL group in the communicator's order, and the blocking forms' bounded wait.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <gpuxfer/detail/device_guard.hpp>
#include <gpuxfer/error.hpp>

#include "communicator/communicator_state.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/stream.hpp"

namespace gpuxfer::detail {

inline void check_rank(const CommunicatorState& s, int rank, const char* name, const std::string& what) {
  if (rank < 0 || rank >= s.world_size) {
    throw Error(Errc::invalid_argument, s.where + ": " + what + ": " + name + " " + std::to_string(rank) +
                                            " is out of range (ranks 0 to " + std::to_string(s.world_size - 1) + ")");
  }
}

// [ptr, ptr + bytes) must be device memory of this rank's device (any pointer for 0 bytes).
inline void check_buffer(const CommunicatorState& s, const void* ptr, std::size_t bytes, const char* name,
                  const std::string& what) {
  if (bytes == 0) return;
  const std::string where = s.where + ": " + what + ": " + name;
  if (ptr == nullptr) throw Error(Errc::invalid_buffer, where + " is null for " + std::to_string(bytes) + " bytes");
  cudaPointerAttributes attributes{};
  GPUXFER_CUDA_TRY_CTX(cudaPointerGetAttributes(&attributes, ptr), where);
  const bool device_memory =
      attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  if (!device_memory || attributes.device != s.device) {
    throw Error(Errc::invalid_buffer, where + " is not memory of device " + std::to_string(s.device));
  }
}

// Whether @p stream is capturing into a CUDA graph (in any mode).
inline bool capturing(const CommunicatorState& s, cudaStream_t stream, const std::string& what) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  GPUXFER_CUDA_TRY_CTX(cudaStreamIsCapturing(stream, &capture), s.where + ": " + what);
  return capture != cudaStreamCaptureStatusNone;
}

// Checks that the communicator is usable and that @p stream can take the operation: while it captures,
// only an operation that needs no host wait (@p why_not, when set, says why this one does).
inline void check_stream(CommunicatorState& s, cudaStream_t stream, const std::string& what,
                         const char* why_not = nullptr) {
  s.comm.check_usable(what);
  // A stream of another device would fail in the NCCL launch or a copy, on this rank alone, its peers left
  // waiting in the collective: refused first. The legacy and per-thread streams are the current device's:
  // this rank's, under the operation's DeviceGuard. A capturing stream's device cannot be asked
  // (caller_stream): there the check is left to the capture (a stream of another device fails in the
  // launch, into an invalid graph, before any replay).
  const bool current_devices = is_default_stream(stream);
  CallerStream caller{.ordinal = s.device};
  if (current_devices) {
    caller.capturing = capturing(s, stream, what);
  } else {
    caller = caller_stream(stream, s.where + ": " + what, "the stream");
    if (caller.capturing) caller.ordinal = s.device;
  }
  if (why_not != nullptr && caller.capturing) {
    throw Error(Errc::unsupported,
                s.where + ": " + what + " cannot be captured into a CUDA graph: " + why_not);
  }
  if (caller.ordinal != s.device) {
    throw Error(Errc::invalid_argument, s.where + ": " + what + ": the stream is of device " +
                                            std::to_string(caller.ordinal) + ", not this rank's device " +
                                            std::to_string(s.device));
  }
}

// Queues @p work on @p stream in the communicator's order: after its previous operation, and the next one
// waits for this. Into a graph @p stream captures, the work is ordered with that stream alone: an event
// recorded outside the capture cannot be waited for inside it, nor one recorded inside it outside.
template <class Work>
void in_order(CommunicatorState& s, cudaStream_t stream, const std::string& what, Work&& work) {
  const bool captured = capturing(s, stream, what);
  if (!captured) stream_wait(stream, s.last);
  work();
  if (!captured) s.last = record_event(s.device, stream);
}

// Queues @p calls (NCCL calls returning the first failure) as one group on @p stream, in the
// communicator's order (in_order).
template <class Calls>
void launch(CommunicatorState& s, cudaStream_t stream, const std::string& what, const std::string& peers,
            Calls&& calls) {
  in_order(s, stream, what, [&] {
    GPUXFER_NCCL_TRY_CTX(ncclGroupStart(), s.where + ": " + what);
    const ncclResult_t queued = calls();
    const ncclResult_t ended = ncclGroupEnd();
    s.comm.check_call(queued, what, peers);  // a peer's failure aborts the communicator, as when polled
    s.comm.settle(ended, what, peers);
  });
}

// Runs @p async on the communicator's own stream after the legacy default stream's work, then waits.
template <class Async>
auto blocking(CommunicatorState& s, const std::string& what, const std::string& peers, Async&& async) {
  DeviceGuard guard(s.device);
  stream_wait(s.stream.get(), record_event(s.device, cudaStreamLegacy));
  auto result = async(s.stream.get());
  s.comm.wait(*record_event(s.device, s.stream.get()), what, peers);
  return result;
}

/// Every rank's @p mine (1 to CommunicatorState::exchange_words words, as many on every rank), rank r's at
/// [r n, r n + n): an ncclAllGather on the communicator's stream, in its order, waited for on the host within
/// the timeout (@p step names it in messages). In a world of one, no NCCL: the wait for the stream alone.
/// @throws Error(Errc::comm_error) on a timeout or a peer's failure
std::vector<std::uint64_t> all_gather_words(CommunicatorState& s, std::span<const std::uint64_t> mine,
                                            const std::string& step);
/// all_gather_words of (@p first, @p second): rank r's at [2r, 2r + 1].
std::vector<std::uint64_t> all_gather_pairs(CommunicatorState& s, std::uint64_t first, std::uint64_t second,
                                            const std::string& step);

inline std::string bytes_text(std::size_t bytes) { return std::to_string(bytes) + " bytes"; }

}  // namespace gpuxfer::detail
