/// @file communicator.hpp
/// @brief Communicator: one rank of a job of several processes, one GPU each, over NCCL.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include <gpuxfer/buffer_ranges.hpp>
#include <gpuxfer/host_buffer.hpp>

namespace gpuxfer {

namespace detail {
struct CommunicatorState;
}

/// What a Communicator may be told besides its place in the job. Fields may be added; callers that
/// name the ones they set keep compiling.
struct CommunicatorOptions {
  /// The CUDA device of this rank; default: the local rank (from_environment) or the rank (explicit form).
  std::optional<int> device;
  /// Bounds every wait (rendezvous, NCCL creation, blocking forms); default: GPUXFER_TIMEOUT, else 300 s.
  std::optional<std::chrono::milliseconds> timeout;
};

/// @brief One rank of a job of N processes, each driving one GPU, joined by an NCCL communicator.
///
/// Every operation is collective: each rank calls it, in the same order, with agreeing arguments (root,
/// sizes, the ranks of a copy). Buffers are device memory of this rank's device. Not thread-safe. Waits
/// are bounded by the timeout; a dead or absent peer makes them throw Errc::comm_error and aborts the
/// communicator. Ordering, CUDA graphs and faults: docs/ORDERING.md, "Across processes"; launchers and
/// the rendezvous: docs/PROCESSES.md.
class Communicator {
 public:
  /// Joins the job that the launch environment describes: GPUXFER_RANK / GPUXFER_WORLD_SIZE /
  /// GPUXFER_LOCAL_RANK / GPUXFER_INIT, torchrun's, Slurm's or Open MPI's variables (docs/PROCESSES.md);
  /// with none set, a job of one process. Collective: returns once every rank has joined.
  /// @throws Error(Errc::invalid_option) for a bad variable (naming it and its value)
  /// @throws Error(Errc::no_device) when CUDA has no device for this rank, naming CUDA's reason
  /// @throws Error(Errc::comm_error) when the rendezvous or the NCCL communicator fails or times out,
  ///         naming the rank(s) involved where known
  [[nodiscard]] static Communicator from_environment(const CommunicatorOptions& options = {});

  /// Joins as @p rank of @p world_size ranks meeting at @p init_address (tcp://host:port, where rank 0
  /// listens, or file:///path; may be empty for one rank).
  /// @throws Error(Errc::invalid_argument) for a world size below 1, a rank outside it, a negative device
  ///         or a timeout below 1 ms; Error(Errc::invalid_option) for a bad address or none for several
  ///         ranks; and as from_environment
  Communicator(int rank, int world_size, const std::string& init_address,
               const CommunicatorOptions& options = {});

  /// How rank 0's bytes (NCCL's unique id) reach every rank when the job bootstraps itself: called once
  /// on every rank, with rank 0's bytes on rank 0 and an empty string elsewhere, it returns rank 0's bytes
  /// on every rank, or throws. It must bound its own waits. `mpi_communicator` (gpuxfer::mpi) passes an
  /// MPI broadcast; a job with a key-value store of its own can pass that.
  using BlobExchange = std::function<std::string(const std::string& blob)>;

  /// Joins as @p rank of @p world_size ranks, @p local_rank (this rank's index on its node) choosing the
  /// device unless CommunicatorOptions::device does, with rank 0's NCCL unique id handed over by
  /// @p exchange (called once, after this rank's device is chosen). Collective: every rank calls it.
  /// The timeout is GPUXFER_TIMEOUT's unless the options give one.
  /// @throws Error(Errc::invalid_argument) for a world size below 1, a rank outside it, a negative local
  ///         rank, no @p exchange, a negative device or a timeout below 1 ms; whatever @p exchange throws;
  ///         Error(Errc::comm_error) when it returns anything but an NCCL unique id; and as from_environment
  [[nodiscard]] static Communicator from_exchange(int rank, int world_size, int local_rank, const BlobExchange& exchange,
                                                  const CommunicatorOptions& options = {});

  /// Waits for the last operation (a stream-ordered one may still be queued) within the timeout, else
  /// aborts; then for the communicator's own streams within the timeout; then releases the NCCL
  /// communicator: finalised within the timeout, else aborted. Where its streams still wait past the timeout
  /// for work that is not gpuxfer's (a blocking call that timed out behind a kernel on the legacy default
  /// stream, say), the communicator is aborted and its memory left allocated, with a warning, rather than
  /// freed under copies that may still run (cudaFree would wait for that work). Never throws. Move
  /// assignment releases the old communicator the same way.
  ~Communicator();
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  [[nodiscard]] int rank() const noexcept;
  [[nodiscard]] int world_size() const noexcept;
  /// The CUDA device ordinal this rank uses.
  [[nodiscard]] int device() const noexcept;
  /// The timeout that bounds every wait.
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept;

  /// Copies @p bytes of @p root's @p buffer into every other rank's @p buffer (ncclBroadcast, in place).
  /// @p bytes must be the same on every rank.
  /// @throws Error(Errc::invalid_argument) for a root out of range; Error(Errc::invalid_buffer) when
  ///         @p buffer is not @p bytes of this rank's device memory, or @p stream not a stream of that
  ///         device (invalid_argument); Error(Errc::comm_error) when the communicator was aborted
  void broadcast_async(void* buffer, std::size_t bytes, int root, cudaStream_t stream);
  /// Blocking broadcast_async. @throws as broadcast_async, and Error(Errc::comm_error) on a timeout or
  ///         a peer's failure
  void broadcast(void* buffer, std::size_t bytes, int root);

  /// Concatenates every rank's @p bytes at @p send (sizes may differ per rank), ascending by rank, into
  /// @p root's @p recv of @p capacity bytes (not read on other ranks). The ranks first exchange their
  /// sizes (a host wait, bounded). Returns on every rank where each rank's bytes land on the root
  /// (GatherPiece::device is the rank).
  /// @throws Error(Errc::invalid_argument) on every rank when the root's capacity is smaller than the sum;
  ///         otherwise as broadcast_async, Error(Errc::comm_error) when the size exchange fails, and
  ///         Error(Errc::unsupported) while @p stream captures
  std::vector<GatherPiece> gather_async(const void* send, std::size_t bytes, void* recv, std::size_t capacity,
                                        int root, cudaStream_t stream);
  /// Blocking gather_async. @throws as gather_async and broadcast
  std::vector<GatherPiece> gather(const void* send, std::size_t bytes, void* recv, std::size_t capacity, int root);

  /// Every rank's @p bytes at @p send (the same size on every rank) into every rank's @p recv, rank r's at
  /// offset r * bytes (ncclAllGather).
  /// @throws Error(Errc::invalid_argument) when @p capacity is below world_size() * @p bytes; as broadcast_async
  void all_gather_async(const void* send, std::size_t bytes, void* recv, std::size_t capacity, cudaStream_t stream);
  /// Blocking all_gather_async. @throws as all_gather_async and broadcast
  void all_gather(const void* send, std::size_t bytes, void* recv, std::size_t capacity);

  /// Copies @p bytes from rank @p src's @p send into rank @p dst's @p recv (ncclSend/ncclRecv; a device
  /// copy when src == dst). @p send is read on @p src only, @p recv written on @p dst only; the other
  /// ranks return at once. @throws as broadcast_async, for src or dst out of range too
  void copy_async(int src, int dst, const void* send, void* recv, std::size_t bytes, cudaStream_t stream);
  /// Blocking copy_async. @throws as copy_async and broadcast
  void copy(int src, int dst, const void* send, void* recv, std::size_t bytes);

  /// Gathers every rank's @p bytes at @p send (device memory of this rank's device; sizes may differ per
  /// rank, 0 included) to @p root's host. Returns on the root one HostBuffer per rank, in rank order,
  /// holding exactly that rank's bytes (empty for 0); on the other ranks an empty vector. Blocking: starts
  /// after the work queued on the legacy default stream and after this communicator's earlier operations
  /// (whatever their streams), comes before its later ones, and returns when the bytes are in the root's
  /// buffers. It waits on the host for two exchanges of four words a rank or fewer (the sizes, then every
  /// rank's "done"), each bounded by the timeout; a third (the root's "ready") when the root has no free
  /// segment as large as its last call's (the first call, say). (The ranks' nodes are exchanged once, when
  /// the communicator is made.) In a world of one no exchange goes through NCCL. Run on one GPU (a world
  /// of one); not yet with two ranks.
  ///
  /// @note The parts land in a shared-memory segment of the root's, reused from call to call; the
  ///       root's HostBuffers are views of it (docs/PROCESSES.md, "Host operations").
  ///
  /// @throws Error(Errc::invalid_argument) for a root out of range; Error(Errc::invalid_buffer) when
  ///         @p send is not @p bytes of this rank's device memory; Error(Errc::out_of_memory) when the
  ///         root's pinned memory, its device staging or /dev/shm (posix_fallocate) has no room, on the
  ///         root, and then Error(Errc::comm_error) naming the root on the other ranks;
  ///         Error(Errc::cuda_error) for a failed CUDA call; Error(Errc::comm_error) when a peer is dead or
  ///         late (naming the rank where NCCL says, after ncclCommAbort) and, on every other rank, when one
  ///         rank failed to write its part (naming it: that rank throws its own error). A rank whose part of
  ///         the NCCL work between nodes failed part-way throws its own error at once, after aborting the
  ///         communicator (no exchange can follow then): the others' bounded waits fail
  std::vector<HostBuffer> gather_to_host(const void* send, std::size_t bytes, int root);

  /// Stream-ordered gather_to_host: each rank's @p send is read after the work queued on its @p stream
  /// (a stream of this rank's device) and after this communicator's earlier operations, and each rank's
  /// @p stream waits for those reads; the root's HostBuffers, returned at once, hold the bytes when the
  /// root's @p stream gets past this point (its stream waits, on the GPU, for every rank's part: an NCCL
  /// reduction of one word to the root ends the call on every stream). Read them only then, and drop them
  /// whenever: their memory serves a later call only once the root's stream is past this one.
  ///
  /// The host waits only for the exchanges (bounded by the timeout, on the communicator's own stream):
  /// the sizes, the root's "ready" when needed (as gather_to_host), and "queued", every rank's outcome of
  /// queueing its copy into the root's segment, before any NCCL work is queued on @p stream. None of
  /// them waits for the work queued on @p stream before the call; each waits for the end of this
  /// communicator's previous operation, as gather_async's size exchange does. Wait with synchronize(stream):
  /// it is bounded by the timeout and fails when a peer does, where a CUDA wait (cudaStreamSynchronize)
  /// may never return after a peer's failure. Cannot be captured into a CUDA graph (the exchanges need
  /// the host): Errc::unsupported while @p stream captures.
  ///
  /// @throws as gather_to_host, every rank alike when one could not queue its copy into the root's
  ///         segment (after queueing the call's reduction, so that the copies the others queued end in
  ///         the communicator's order, and the memory they use goes back only after them); a rank that
  ///         fails after the "queued" exchange (a failed CUDA or NCCL call) aborts the communicator, so
  ///         that the others' bounded waits fail instead of hang
  std::vector<HostBuffer> gather_to_host_async(const void* send, std::size_t bytes, int root, cudaStream_t stream);

  /// Copies @p root's host bytes @p data (pageable or page-locked; read on the root only) into every rank's
  /// @p recv (device memory of this rank's device, @p capacity bytes; the root's too); the bytes of recv past
  /// the root's size are left alone. The ranks first exchange the root's size and their capacities, so that
  /// a recv too small (or null for bytes) is Errc::invalid_argument on every rank. Blocking: starts after the
  /// work queued on the legacy default stream (the root's reads of @p data too) and after this
  /// communicator's earlier operations (whatever their streams), comes before its later ones, and returns
  /// when @p recv holds the bytes on this rank (the root may reuse @p data then). It waits on the host for
  /// two exchanges of four words a rank or fewer (the sizes with the root's preparation, then every rank's
  /// "done"), each bounded by the timeout. In a world of one no exchange goes through NCCL. Run on one GPU
  /// (a world of one); not yet with two ranks.
  ///
  /// @note The root's bytes reach its node's ranks through a shared-memory segment, other nodes over NCCL
  ///       (docs/PROCESSES.md, "Host operations").
  ///
  /// @throws Error(Errc::invalid_argument) for a root out of range and, on every rank, for a recv smaller
  ///         than the root's size or null while the root has bytes; Error(Errc::invalid_buffer) when
  ///         @p recv is not @p capacity bytes of this rank's device memory; Error(Errc::out_of_memory) when
  ///         the root's pinned memory or /dev/shm has no room, on the root, and then Error(Errc::comm_error)
  ///         naming the root on the other ranks; Error(Errc::cuda_error) for a failed CUDA call;
  ///         Error(Errc::comm_error) when a peer is dead or late (naming the rank where NCCL says, after
  ///         ncclCommAbort) and, on every other rank, when one rank failed to take the bytes (naming it:
  ///         that rank throws its own error). A rank whose NCCL send or receive between nodes failed
  ///         throws its own error at once, after aborting the communicator: the others' bounded waits fail
  void broadcast_from_host(std::span<const std::byte> data, void* recv, std::size_t capacity, int root);

  /// Stream-ordered broadcast_from_host: each rank's @p recv is written after the work queued on its
  /// @p stream (a stream of this rank's device) and after this communicator's earlier operations, and
  /// holds the bytes when that stream gets past this point. The root reads @p data on the host during the
  /// call (not after its stream's earlier work), and may reuse it when the call returns, except when no
  /// other rank shares its node and @p data is all page-locked: the root's copy then reads it on the GPU,
  /// and it must stay unchanged until the root's @p stream gets past this point, as with cudaMemcpyAsync.
  /// An NCCL reduction of one word to the root ends the call on every stream: the root's stream waits for
  /// every rank's copy out of its segment.
  ///
  /// The host waits only for the exchanges (bounded by the timeout, on the communicator's own stream): the
  /// sizes with the root's preparation, and "queued", every rank's outcome of queueing its copy out of the
  /// root's segment, before any NCCL work is queued on @p stream; neither waits for the work queued on
  /// @p stream before the call, and each waits for the end of this communicator's previous operation.
  /// Wait with synchronize(stream), bounded as gather_to_host_async says. Cannot be captured
  /// (Errc::unsupported).
  ///
  /// @throws as broadcast_from_host; a rank that fails after the "queued" exchange aborts the communicator,
  ///         as gather_to_host_async
  void broadcast_from_host_async(std::span<const std::byte> data, void* recv, std::size_t capacity, int root,
                                 cudaStream_t stream);

  /// Waits on the host until @p stream's work queued so far is done, polling NCCL's asynchronous error,
  /// at most the timeout: the bounded wait for the stream-ordered forms.
  /// @throws Error(Errc::comm_error) on a timeout or a peer's failure (the communicator is aborted);
  ///         Error(Errc::cuda_error / device_fault) when the stream's work failed; Error(Errc::unsupported)
  ///         while @p stream captures
  void synchronize(cudaStream_t stream);

 private:
  explicit Communicator(std::unique_ptr<detail::CommunicatorState> state) noexcept;
  std::unique_ptr<detail::CommunicatorState> state_;
};

}  // namespace gpuxfer
