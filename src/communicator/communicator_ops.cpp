// Communicator's operations: checks, then one NCCL group queued after the caller's stream and the
// communicator's previous operation; the blocking forms add a bounded host wait. None needs the host, so
// each can be captured into a CUDA graph.
#include <gpuxfer/communicator.hpp>

#include <string>

#include <nccl.h>

#include <gpuxfer/error.hpp>

#include "communicator/comm_launch.hpp"

namespace gpuxfer {

using detail::CommunicatorState;
using detail::bytes_text;
using detail::check_buffer;
using detail::check_rank;
using detail::check_stream;

void Communicator::broadcast_async(void* buffer, std::size_t bytes, int root, cudaStream_t stream) {
  CommunicatorState& s = *state_;
  detail::DeviceGuard guard(s.device);  // before any CUDA call, so that none lands on another device
  const std::string what = "broadcast of " + bytes_text(bytes) + " from rank " + std::to_string(root);
  check_rank(s, root, "root", what);
  check_buffer(s, buffer, bytes, "buffer", what);
  check_stream(s, stream, what);
  if (bytes == 0) return;
  detail::launch(s, stream, what, detail::other_ranks(s.rank, s.world_size),
         [&] { return ncclBroadcast(buffer, buffer, bytes, ncclUint8, root, s.comm.get(), stream); });
}

void Communicator::broadcast(void* buffer, std::size_t bytes, int root) {
  detail::blocking(*state_, "broadcast", detail::other_ranks(state_->rank, state_->world_size), [&](cudaStream_t st) {
    broadcast_async(buffer, bytes, root, st);
    return 0;
  });
}

void Communicator::all_gather_async(const void* send, std::size_t bytes, void* recv, std::size_t capacity,
                                    cudaStream_t stream) {
  CommunicatorState& s = *state_;
  detail::DeviceGuard guard(s.device);  // before any CUDA call, so that none lands on another device
  const std::string what = "all_gather of " + bytes_text(bytes) + " a rank";
  const std::size_t total = bytes * static_cast<std::size_t>(s.world_size);
  if (capacity < total) {
    throw Error(Errc::invalid_argument, s.where + ": " + what + ": recv holds " + bytes_text(capacity) +
                                            ", not the " + bytes_text(total) + " of every rank");
  }
  check_buffer(s, send, bytes, "send", what);
  check_buffer(s, recv, total, "recv", what);
  check_stream(s, stream, what);
  if (bytes == 0) return;
  detail::launch(s, stream, what, detail::other_ranks(s.rank, s.world_size),
         [&] { return ncclAllGather(send, recv, bytes, ncclUint8, s.comm.get(), stream); });
}

void Communicator::all_gather(const void* send, std::size_t bytes, void* recv, std::size_t capacity) {
  detail::blocking(*state_, "all_gather", detail::other_ranks(state_->rank, state_->world_size), [&](cudaStream_t st) {
    all_gather_async(send, bytes, recv, capacity, st);
    return 0;
  });
}

void Communicator::copy_async(int src, int dst, const void* send, void* recv, std::size_t bytes,
                              cudaStream_t stream) {
  CommunicatorState& s = *state_;
  detail::DeviceGuard guard(s.device);  // before any CUDA call, so that none lands on another device
  const std::string what =
      "copy of " + bytes_text(bytes) + " from rank " + std::to_string(src) + " to rank " + std::to_string(dst);
  check_rank(s, src, "src", what);
  check_rank(s, dst, "dst", what);
  if (s.rank == src) check_buffer(s, send, bytes, "send", what);
  if (s.rank == dst) check_buffer(s, recv, bytes, "recv", what);
  check_stream(s, stream, what);
  if (bytes == 0 || (s.rank != src && s.rank != dst)) return;
  if (src == dst) {
    // No NCCL, but in the communicator's order all the same (a broadcast into send just before, say).
    detail::in_order(s, stream, what, [&] {
      GPUXFER_CUDA_TRY_CTX(cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, stream),
                           s.where + ": " + what);
    });
    return;
  }
  const int peer = s.rank == src ? dst : src;
  detail::launch(s, stream, what, "rank " + std::to_string(peer), [&] {
    return s.rank == src ? ncclSend(send, bytes, ncclUint8, dst, s.comm.get(), stream)
                         : ncclRecv(recv, bytes, ncclUint8, src, s.comm.get(), stream);
  });
}

void Communicator::copy(int src, int dst, const void* send, void* recv, std::size_t bytes) {
  const int peer = state_->rank == src ? dst : src;
  detail::blocking(*state_, "copy", "rank " + std::to_string(peer), [&](cudaStream_t st) {
    copy_async(src, dst, send, recv, bytes, st);
    return 0;
  });
}

}  // namespace gpuxfer
