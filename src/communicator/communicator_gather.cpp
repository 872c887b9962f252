// Communicator::gather: the ranks exchange their sizes (and the root's capacity) with an ncclAllGather on
// the communicator's own stream, waited for on the host within the timeout; then ncclGather when every
// rank sends as much, else grouped ncclSend/ncclRecv into the root's memory. all_gather_pairs, the
// exchange itself, serves gather_to_host too.
#include <gpuxfer/communicator.hpp>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include <nccl.h>

#include <gpuxfer/error.hpp>

#include "communicator/comm_launch.hpp"

namespace gpuxfer {
namespace detail {

std::vector<std::uint64_t> all_gather_words(CommunicatorState& s, std::span<const std::uint64_t> mine,
                                            const std::string& step) {
  const std::size_t n = mine.size();
  if (n == 0 || n > CommunicatorState::exchange_words) {
    throw Error(Errc::invalid_argument, s.where + ": " + step + ": " + std::to_string(n) + " words a rank");
  }
  const cudaStream_t stream = s.stream.get();
  // The communicator's previous operation first, on its own (a stream-ordered one may sit behind the
  // caller's work on its stream), so that a timeout there says what it waited for.
  if (s.last && !s.last->completed()) {
    const std::string peers = other_ranks(s.rank, s.world_size);
    s.comm.wait(*s.last, step + ", waiting for the communicator's previous operation to end", peers,
                "the work queued before it on its stream, or " + peers + ", holds it up");
  }
  if (s.world_size == 1) {
    // Nobody to tell: the wait alone, in the communicator's order, which callers count on (the "done"
    // exchange follows the rank's copies on this stream).
    stream_wait(stream, s.last);
    const SharedEvent done = record_event(s.device, stream);
    s.comm.wait(*done, step, "no other rank");
    s.last = done;
    return {mine.begin(), mine.end()};
  }
  const std::size_t count = n * static_cast<std::size_t>(s.world_size);
  const std::size_t at = n * static_cast<std::size_t>(s.rank);
  std::uint64_t* host = s.sizes_host.get();
  std::uint64_t* device = s.sizes_device.get();
  std::copy(mine.begin(), mine.end(), host + at);
  GPUXFER_CUDA_TRY_CTX(
      cudaMemcpyAsync(device + at, host + at, n * sizeof(std::uint64_t), cudaMemcpyHostToDevice, stream),
      s.where + ": " + step);
  launch(s, stream, step, other_ranks(s.rank, s.world_size),
         [&] { return ncclAllGather(device + at, device, n, ncclUint64, s.comm.get(), stream); });
  GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(host, device, count * sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream),
                       s.where + ": " + step);
  const SharedEvent done = record_event(s.device, stream);
  s.comm.wait(*done, step, other_ranks(s.rank, s.world_size));
  s.last = done;
  return {host, host + count};
}

std::vector<std::uint64_t> all_gather_pairs(CommunicatorState& s, std::uint64_t first, std::uint64_t second,
                                            const std::string& step) {
  const std::uint64_t mine[] = {first, second};
  return all_gather_words(s, mine, step);
}

}  // namespace detail

namespace {

using detail::CommunicatorState;

// Every rank's (bytes, capacity), rank r's at [2r, 2r + 1].
std::vector<std::uint64_t> exchange_sizes(CommunicatorState& s, std::size_t bytes, std::size_t capacity,
                                          const std::string& what) {
  return detail::all_gather_pairs(s, bytes, capacity, what + " (the exchange of sizes)");
}

}  // namespace

std::vector<GatherPiece> Communicator::gather_async(const void* send, std::size_t bytes, void* recv,
                                                    std::size_t capacity, int root, cudaStream_t stream) {
  CommunicatorState& s = *state_;
  detail::DeviceGuard guard(s.device);
  const std::string what = "gather of " + detail::bytes_text(bytes) + " to rank " + std::to_string(root);
  detail::check_rank(s, root, "root", what);
  detail::check_buffer(s, send, bytes, "send", what);
  if (s.rank == root) detail::check_buffer(s, recv, capacity, "recv", what);
  detail::check_stream(s, stream, what,
                       "it first exchanges the ranks' sizes, a wait on the host (broadcast_async, all_gather_async "
                       "and copy_async can be captured)");
  const std::vector<std::uint64_t> sizes = exchange_sizes(s, bytes, s.rank == root ? capacity : 0, what);
  std::vector<GatherPiece> pieces;
  std::size_t total = 0;
  bool equal = true;
  for (int r = 0; r < s.world_size; ++r) {
    const std::size_t size = sizes[2 * r];
    pieces.push_back({static_cast<std::size_t>(r), total, size});
    total += size;
    equal = equal && size == sizes[0];
  }
  const std::size_t root_capacity = sizes[2 * root + 1];
  if (root_capacity < total) {
    // Every rank knows it now, and every rank throws: none is left waiting for the others.
    throw Error(Errc::invalid_argument, s.where + ": " + what + ": the root's recv holds " +
                                            detail::bytes_text(root_capacity) + ", not the " +
                                            detail::bytes_text(total) + " of every rank");
  }
  if (total == 0) return pieces;
  const std::string peers = s.rank == root ? detail::other_ranks(s.rank, s.world_size) : "rank " + std::to_string(root);
  auto* out = static_cast<std::byte*>(recv);
  detail::launch(s, stream, what, peers, [&]() -> ncclResult_t {
    if (equal) return ncclGather(send, recv, bytes, ncclUint8, root, s.comm.get(), stream);
    if (bytes > 0) {
      const ncclResult_t sent = ncclSend(send, bytes, ncclUint8, root, s.comm.get(), stream);
      if (sent != ncclSuccess && sent != ncclInProgress) return sent;
    }
    if (s.rank != root) return ncclSuccess;
    for (const GatherPiece& piece : pieces) {
      if (piece.size == 0) continue;
      const ncclResult_t got = ncclRecv(out + piece.offset, piece.size, ncclUint8, static_cast<int>(piece.device),
                                        s.comm.get(), stream);
      if (got != ncclSuccess && got != ncclInProgress) return got;
    }
    return ncclSuccess;
  });
  return pieces;
}

std::vector<GatherPiece> Communicator::gather(const void* send, std::size_t bytes, void* recv, std::size_t capacity,
                                              int root) {
  const std::string peers =
      state_->rank == root ? detail::other_ranks(state_->rank, state_->world_size) : "rank " + std::to_string(root);
  return detail::blocking(*state_, "gather", peers, [&](cudaStream_t st) {
    return gather_async(send, bytes, recv, capacity, root, st);
  });
}

}  // namespace gpuxfer
