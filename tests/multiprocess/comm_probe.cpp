// One rank of a Communicator test job, started alone (a world of one) or by `gpuxfer launch -n N`:
//   ops              every operation, stream-ordered (then synchronize) and blocking, sizes 0, 1, 4099 and
//                    1 MiB + 7 (gather and gather_to_host: different sizes per rank too, 0 among them;
//                    broadcast_from_host from pageable and pinned host memory, and a recv too small refused
//                    on every rank; the host operations behind a slow producer on their stream, the
//                    legacy default stream for the blocking forms, gather_to_host_async with a write queued
//                    right behind it), every byte compared;
//                    gather_to_host's reused segments (results of two calls alive at once apart, a later
//                    call's in the same memory once they are dropped, results still right after the
//                    communicator is gone, no /dev/shm segment left after them); prints "rank R of N: no
//                    shared segment left" and "rank R of N: C checks passed" and exits 0, else prints the
//                    first mismatch and exits 1
//   ops separate-nodes
//                    as ops, each rank on a node of its own (GPUXFER_NODE_ID=comm-probe-rank-R):
//                    gather_to_host and broadcast_from_host take the path between nodes (NCCL with the root's
//                    GPU) instead of the shared segment
//   graphs           broadcast_async, all_gather_async and copy_async captured into a CUDA graph and
//                    replayed 100 times behind a producer that writes new bytes before each replay, every
//                    replay verified; the operations that need the host refused while capturing
//   beside-capture   while the main thread's stream captures in global mode (torch.cuda.graph's default), a
//                    second thread runs the blocking operations (all_gather, broadcast, gather_to_host,
//                    broadcast_from_host from pageable memory, synchronize of a stream-ordered all_gather;
//                    with "setup" also a new Communicator of one rank made, used and released: NCCL's
//                    set-up and teardown, which NCCL 2.28 runs on threads of its own): each must succeed with
//                    every byte right and the capture must end intact; prints "rank R of N: beside a capture,
//                    C checks passed" and exits 0
//   first-host-op [separate-nodes]
//                    on a new communicator, after a copy each way between ranks 0 and 1 (NCCL's
//                    connections), the first host operation: gather_to_host_async of 1 MiB + 7 to rank 0
//                    behind a producer of 50 ms on the other ranks, which must return before that producer is
//                    done and gather its bytes; prints "rank R of N: a first host operation, C checks passed"
//   let-go-behind-producer
//                    blocking gather_to_host of 1, 2, 3 and 4 MiB to rank 0 (results dropped), so that the
//                    root's arena, and each other rank's mappings on its node, keep three segments; then
//                    gather_to_host_async of 5 MiB behind a producer of 50 ms (on the other ranks; in a world
//                    of one on the root): the root makes a fifth segment and lets go of the oldest (the other
//                    ranks map the new one and let go of one), which must not wait for the producer
//                    (cudaHostUnregister waits for the device's work); prints "rank R of N: letting go of
//                    segments, C checks passed"
//   fail-part-way gather|broadcast
//                    each rank a node of its own; rank 1's second ncclSend of a blocking gather_to_host of
//                    16 MiB (eight pieces) to rank 0, or its ncclRecv of a blocking broadcast_from_host of
//                    16 MiB from rank 0, fails (nccl_fault, LD_PRELOAD): rank 1 must throw its own error at
//                    once (exit 1), not wait for the timeout; with COMM_PROBE_CALL_AGAIN set, rank 1 then
//                    makes the call again and prints what it threw
//   release-after-timeout
//                    a world of one: a kernel spinning 15 s on the legacy default stream (not gpuxfer's work)
//                    holds up a blocking broadcast_from_host, which must fail with comm_error within
//                    GPUXFER_TIMEOUT; releasing the communicator after that must end within the timeout too,
//                    well before the kernel does; prints "rank 0 of 1: released after a timeout: ..." and
//                    exits 0, else prints what took too long and exits 1
//   exit-early R     rank R joins the rendezvous (rank 0 with a real NCCL id) and exits before NCCL; the
//   others create their
//                    Communicator, which must fail (exit 1, printing the error)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include <unistd.h>

#include <nccl.h>

#include <gpuxfer/communicator.hpp>
#include <gpuxfer/error.hpp>
#include <gpuxfer/testing/cuda_check.hpp>
#include <gpuxfer/testing/cuda_resources.hpp>
#include <gpuxfer/testing/pattern.hpp>

#include "bootstrap/launch_env.hpp"
#include "bootstrap/rendezvous.hpp"

namespace {

using gpuxfer::Communicator;
using gpuxfer::testing::DeviceMemory;
using gpuxfer::testing::cuda_check;
constexpr std::byte poison{0xA5};
constexpr std::uint64_t long_ns = 50'000'000;  ///< a producer far slower than a call's host part: 50 ms

std::uint64_t seed_of(int rank, std::size_t bytes) { return gpuxfer::pattern::seed_for(bytes + 17, rank); }

struct Checker {
  Communicator& comm;
  int checks = 0;
  std::vector<std::string> failures;  ///< the first few, in order
  std::uint64_t gathers = 0;  ///< gather_to_host calls so far (the same on every rank): each call's bytes differ
  std::chrono::steady_clock::time_point produced{};  ///< when the last slow producer was queued
  double producer_queue_ms = 0;                      ///< how long queueing it took on the host
  std::chrono::steady_clock::time_point called{};    ///< when the call under test was made (see calling())

  explicit Checker(Communicator& c) : comm(c) {}

  void fail(std::string message) {
    if (failures.size() < 12) failures.push_back(std::move(message));
  }
  // A slow producer's spin before a stream-ordered call on @p root's behalf: on the other ranks only (in a
  // world of one, on the root), so that the root's stream can be past its own work long before theirs.
  std::uint64_t producer_ns(int root) const {
    return comm.world_size() == 1 || comm.rank() != root ? long_ns : 0;
  }
  // fill_device_slow, timed: expect_not_waited says how long the host spent since.
  void produce(void* dst, std::size_t bytes, std::uint64_t seed, std::uint64_t spin_ns, cudaStream_t stream) {
    const auto start = std::chrono::steady_clock::now();
    gpuxfer::pattern::fill_device_slow(dst, bytes, seed, spin_ns, stream);
    produced = std::chrono::steady_clock::now();
    called = produced;
    producer_queue_ms = std::chrono::duration<double, std::milli>(produced - start).count();
  }
  // Right before the call under test, when more work was queued after the producer (a poison): the
  // not-waited check then times that work and the call apart.
  void calling() { called = std::chrono::steady_clock::now(); }
  // After a stream-ordered call behind a producer: it returned without waiting for that work.
  void expect_not_waited(cudaStream_t stream, const std::string& what) {
    ++checks;
    if (cudaStreamQuery(stream) == cudaErrorNotReady) return;
    using ms = std::chrono::duration<double, std::milli>;
    const double between = ms(called - produced).count();
    const double call = ms(std::chrono::steady_clock::now() - called).count();
    char times[200];
    std::snprintf(times, sizeof times,
                  " (queueing the producer took %.2f ms, the work queued after it %.2f ms, the call %.2f ms; "
                  "the producer %.0f ms)",
                  producer_queue_ms, between, call, static_cast<double>(long_ns) / 1e6);
    fail(what + ": returned only after the work queued before it on its stream" + times);
  }

  // Device memory of @p bytes (+ 64 bytes of tail that must stay poisoned), poisoned or patterned.
  DeviceMemory make(std::size_t bytes, std::optional<std::uint64_t> seed) const {
    DeviceMemory memory(comm.device(), bytes + 64);
    std::vector<std::byte> host(bytes + 64, poison);
    if (seed) gpuxfer::pattern::fill_host(std::span(host).first(bytes), *seed);
    cuda_check(cudaMemcpy(memory.get(), host.data(), host.size(), cudaMemcpyHostToDevice), "fill");
    return memory;
  }
  std::vector<std::byte> read(const DeviceMemory& memory) const {
    std::vector<std::byte> host(memory.size());
    cuda_check(cudaMemcpy(host.data(), memory.get(), host.size(), cudaMemcpyDeviceToHost), "read back");
    return host;
  }
  // Bytes [at, at + bytes) must be seed's pattern; the 64 after @p end must still be poison.
  void expect(const std::vector<std::byte>& got, std::size_t at, std::size_t bytes, std::uint64_t seed,
              const std::string& what) {
    ++checks;
    const std::size_t wrong = gpuxfer::pattern::count_mismatches_host(std::span(got).subspan(at, bytes), seed);
    if (wrong != 0) fail(what + ": " + std::to_string(wrong) + " wrong bytes");
  }
  void expect_tail(const std::vector<std::byte>& got, std::size_t end, const std::string& what) {
    for (std::size_t i = end; i < end + 64; ++i) {
      if (got[i] != poison) return fail(what + ": wrote past the end");
    }
  }
  std::uint64_t seed(int rank, std::size_t bytes) const { return seed_of(rank, bytes); }

  void broadcast(std::size_t bytes, int root, bool async, cudaStream_t stream) {
    const std::string what = "broadcast " + std::to_string(bytes) + " from " + std::to_string(root);
    DeviceMemory buffer = make(bytes, comm.rank() == root ? std::optional(seed(root, bytes)) : std::nullopt);
    if (async) {
      comm.broadcast_async(buffer.get(), bytes, root, stream);
      comm.synchronize(stream);
    } else {
      comm.broadcast(buffer.get(), bytes, root);
    }
    const auto got = read(buffer);
    expect(got, 0, bytes, seed(root, bytes), what);
    expect_tail(got, bytes, what);
  }

  void gather(std::size_t base, bool equal, int root, bool async, cudaStream_t stream) {
    const auto size_of = [&](int r) { return equal ? base : base + 3 * static_cast<std::size_t>(r); };
    std::size_t total = 0;
    for (int r = 0; r < comm.world_size(); ++r) total += size_of(r);
    const std::size_t mine = size_of(comm.rank());
    const std::string what = "gather " + std::to_string(mine) + " to " + std::to_string(root);
    DeviceMemory send = make(mine, seed(comm.rank(), mine));
    DeviceMemory recv = make(total, std::nullopt);
    const auto pieces = async ? comm.gather_async(send.get(), mine, recv.get(), total, root, stream)
                              : comm.gather(send.get(), mine, recv.get(), total, root);
    if (async) comm.synchronize(stream);
    ++checks;
    if (pieces.size() != static_cast<std::size_t>(comm.world_size()))
      fail(what + ": " + std::to_string(pieces.size()) + " pieces");
    if (comm.rank() != root) return;
    const auto got = read(recv);
    std::size_t offset = 0;
    for (int r = 0; r < comm.world_size(); ++r) {
      if (pieces[r].offset != offset || pieces[r].size != size_of(r)) fail(what + ": wrong piece");
      expect(got, offset, size_of(r), seed(r, size_of(r)), what + ", rank " + std::to_string(r) + "'s part");
      offset += size_of(r);
    }
    expect_tail(got, total, what);
  }

  // gather_to_host: on the root one HostBuffer per rank holding exactly that rank's bytes, elsewhere none.
  // Blocking: the send buffer is written on the legacy default stream just before by a producer of 50 ms
  // (not waited): the gather must start after it. Stream-ordered: a producer of 50 ms writes it on @p stream
  // (on the other ranks only: the root's stream must wait for theirs) and a poison is queued right behind
  // the call there: the gather must read after the one, before the other, and return before the producer
  // is done. Each call's bytes differ, so that a reused segment cannot hold them already.
  void gather_to_host(std::size_t base, bool equal, int root, bool async, cudaStream_t stream) {
    const auto size_of = [&](int r) { return equal ? base : base + 3 * static_cast<std::size_t>(r); };
    const std::size_t mine = size_of(comm.rank());
    const std::string what = std::string(async ? "gather_to_host_async " : "gather_to_host ") +
                             std::to_string(mine) + " to " + std::to_string(root);
    DeviceMemory send(comm.device(), mine + 64);
    std::vector<gpuxfer::HostBuffer> out;
    const std::uint64_t salt = 1 + 100 * ++gathers;  // a reused segment holds another call's bytes
    if (async) {
      const std::uint64_t spin = producer_ns(root);
      if (mine > 0) produce(send.get(), mine, seed(comm.rank(), mine) + salt, spin, stream);
      out = comm.gather_to_host_async(send.get(), mine, root, stream);
      if (mine > 0 && spin > 0) expect_not_waited(stream, what);
      if (mine > 0) cuda_check(cudaMemsetAsync(send.get(), static_cast<int>(poison), mine, stream), "poison");
      comm.synchronize(stream);
    } else {
      // A kernel, not a copy from pageable memory, which may wait on the host for the stream's earlier work.
      if (mine > 0) produce(send.get(), mine, seed(comm.rank(), mine) + salt, long_ns, 0);
      out = comm.gather_to_host(send.get(), mine, root);
      cuda_check(cudaStreamSynchronize(0), "the fill");
    }
    ++checks;
    if (comm.rank() != root) {
      if (!out.empty()) fail(what + ": a non-root rank got buffers");
      return;
    }
    if (out.size() != static_cast<std::size_t>(comm.world_size())) {
      fail(what + ": " + std::to_string(out.size()) + " buffers");
      return;
    }
    for (int r = 0; r < comm.world_size(); ++r) {
      ++checks;
      const std::string part = what + ", rank " + std::to_string(r) + "'s buffer";
      if (out[r].size() != size_of(r)) {
        fail(part + ": " + std::to_string(out[r].size()) + " bytes");
        continue;
      }
      const std::size_t wrong = gpuxfer::pattern::count_mismatches_host(out[r].span(), seed(r, size_of(r)) + salt);
      if (wrong != 0) fail(part + ": " + std::to_string(wrong) + " wrong bytes");
    }
  }

  // Every rank's part of a gather_to_host to @p root of @p bytes a rank, rank r's pattern
  // seed(r, bytes) + @p salt (the send filled with a blocking copy just before).
  std::vector<gpuxfer::HostBuffer> gather_salted(std::size_t bytes, int root, std::uint64_t salt) {
    DeviceMemory send(comm.device(), bytes);
    std::vector<std::byte> host(bytes);
    gpuxfer::pattern::fill_host(host, seed(comm.rank(), bytes) + salt);
    cuda_check(cudaMemcpy(send.get(), host.data(), bytes, cudaMemcpyHostToDevice), "fill");
    return comm.gather_to_host(send.get(), bytes, root);
  }
  // As gather_salted, stream-ordered on @p stream, the send written there by a producer spinning @p spin_ns
  // first (not waited); @p send holds the memory until the caller has synchronised.
  std::vector<gpuxfer::HostBuffer> gather_salted_async(std::size_t bytes, int root, std::uint64_t salt,
                                                       std::uint64_t spin_ns, cudaStream_t stream,
                                                       DeviceMemory& send) {
    send = DeviceMemory(comm.device(), bytes);
    produce(send.get(), bytes, seed(comm.rank(), bytes) + salt, spin_ns, stream);
    return comm.gather_to_host_async(send.get(), bytes, root, stream);
  }
  // On the root: @p out holds every rank's bytes of gather_salted(bytes, root, salt).
  void expect_salted(const std::vector<gpuxfer::HostBuffer>& out, std::size_t bytes, int root,
                     std::uint64_t salt, const std::string& what) {
    if (comm.rank() != root) return;
    ++checks;
    if (out.size() != static_cast<std::size_t>(comm.world_size())) {
      fail(what + ": " + std::to_string(out.size()) + " buffers");
      return;
    }
    for (int r = 0; r < comm.world_size(); ++r) {
      const std::string part = what + ", rank " + std::to_string(r) + "'s buffer";
      const std::uint64_t pattern = seed(r, bytes) + salt;
      const std::size_t wrong =
          out[r].size() != bytes ? bytes : gpuxfer::pattern::count_mismatches_host(out[r].span(), pattern);
      if (wrong != 0)
        fail(part + ": " + std::to_string(out[r].size()) + " bytes, " + std::to_string(wrong) + " wrong");
    }
  }

  // gather_to_host's results are views of the root's reused shared segments: two calls whose results are
  // both alive hold memory apart (each call's bytes right after the other call), and once both are
  // dropped a third call's results lie where one of theirs did. Returns the third call's results (to be
  // checked again after the communicator is gone, see run_ops).
  std::vector<gpuxfer::HostBuffer> gather_to_host_reuse(int root) {
    const std::size_t bytes = (1 << 20) + 7;
    const std::string what = "gather_to_host to " + std::to_string(root) + " while results are alive";
    std::vector<gpuxfer::HostBuffer> first = gather_salted(bytes, root, 10);
    std::vector<gpuxfer::HostBuffer> second = gather_salted(bytes, root, 11);
    expect_salted(first, bytes, root, 10, what + " (the first call, after the second)");
    expect_salted(second, bytes, root, 11, what + " (the second call)");
    const std::byte* first_memory = nullptr;
    const std::byte* second_memory = nullptr;
    if (comm.rank() == root && failures.empty()) {
      ++checks;
      for (const auto& a : first) {
        for (const auto& b : second) {
          const bool apart = a.data() + a.size() <= b.data() || b.data() + b.size() <= a.data();
          if (!apart) fail(what + ": the two calls' results overlap");
        }
      }
      first_memory = first[static_cast<std::size_t>(root)].data();
      second_memory = second[static_cast<std::size_t>(root)].data();
    }
    first.clear();
    second.clear();
    std::vector<gpuxfer::HostBuffer> third = gather_salted(bytes, root, 12);
    expect_salted(third, bytes, root, 12, what + " (a third call, after dropping both)");
    if (comm.rank() == root && failures.empty()) {
      ++checks;
      const std::byte* memory = third[static_cast<std::size_t>(root)].data();
      if (memory != first_memory && memory != second_memory)
        fail("gather_to_host to " + std::to_string(root) +
             ": after dropping the results, a later call's results are not in the same memory");
    }
    return third;
  }

  // gather_to_host_async's reused segments: two calls back to back without a wait between them (the first
  // behind a slow producer), both results kept and right; then a call whose results are dropped before its
  // stream is past it, behind a slow producer, and a call right after it, whose results must be right:
  // the dropped call's memory serves it only once the root's stream is past the dropped call.
  void gather_to_host_async_reuse(int root, cudaStream_t stream) {
    const std::size_t bytes = (1 << 20) + 7;
    const std::string what = "gather_to_host_async to " + std::to_string(root);
    DeviceMemory a, b, c, d;
    auto first = gather_salted_async(bytes, root, 30, producer_ns(root), stream, a);
    auto second = gather_salted_async(bytes, root, 31, 0, stream, b);
    comm.synchronize(stream);
    expect_salted(first, bytes, root, 30, what + " twice back to back (the first)");
    expect_salted(second, bytes, root, 31, what + " twice back to back (the second)");
    first.clear();
    second.clear();
    (void)gather_salted_async(bytes, root, 32, producer_ns(root), stream, c);  // its results dropped at once
    auto fourth = gather_salted_async(bytes, root, 33, 0, stream, d);
    comm.synchronize(stream);
    expect_salted(fourth, bytes, root, 33, what + " right after a call whose results were dropped at once");
  }

  // broadcast_from_host: the root's host bytes (pageable or pinned) into every rank's recv of bytes + 64
  // (the 64 past the size must stay poisoned). Blocking: a producer of 50 ms, then the poison of the recv,
  // then (pinned) the copy of the data from the device, are queued on the legacy default stream just before
  // (not waited): the broadcast must start after all of them. Stream-ordered: a producer of 50 ms then the
  // poison are queued on @p stream before the call (the data filled before it): the broadcast must write
  // after both, and return before they are done. Everything the test allocates comes before the producer
  // (cudaMalloc and cudaHostAlloc may synchronise).
  void broadcast_from_host(std::size_t bytes, int root, bool pinned, bool async, cudaStream_t stream) {
    const std::string what = std::string(async ? "broadcast_from_host_async " : "broadcast_from_host ") +
                             std::to_string(bytes) + " from " + std::to_string(root) +
                             (pinned ? " (pinned)" : " (pageable)");
    DeviceMemory recv(comm.device(), bytes + 64);
    std::vector<std::byte> pageable;
    gpuxfer::testing::PinnedMemory locked;
    DeviceMemory source;
    std::span<const std::byte> data;
    if (comm.rank() == root) {
      if (pinned) {
        // Pattern on the device, copied into the pinned data below (on the legacy default stream, not
        // waited, for the blocking form; the stream-ordered one reads the data on the host during the call).
        locked = gpuxfer::testing::PinnedMemory(bytes);
        std::vector<std::byte> pattern(bytes);
        gpuxfer::pattern::fill_host(pattern, seed(root, bytes) + 2);
        source = DeviceMemory(comm.device(), bytes + 1);
        cuda_check(cudaMemcpy(source.get(), pattern.data(), bytes, cudaMemcpyHostToDevice), "fill");
        data = locked.span();
      } else {
        pageable.resize(bytes);
        gpuxfer::pattern::fill_host(pageable, seed(root, bytes) + 2);
        data = pageable;
      }
    }
    if (async) {
      // Once first, so that the root's staging or segment of this size exists: a first cudaHostAlloc or
      // cudaHostRegister behind the producer could wait for it on the host.
      comm.broadcast_from_host_async(data, recv.get(), bytes + 64, root, stream);
      comm.synchronize(stream);
    }
    const cudaStream_t order = async ? stream : cudaStream_t{0};
    produce(recv.get(), bytes + 64, seed(root, bytes) + 3, long_ns, order);
    cuda_check(cudaMemsetAsync(recv.get(), static_cast<int>(poison), bytes + 64, order), "poison");
    if (comm.rank() == root && pinned) {
      cuda_check(cudaMemcpyAsync(locked.data(), source.get(), bytes, cudaMemcpyDeviceToHost, 0), "fill");
      if (async) cuda_check(cudaStreamSynchronize(0), "fill");
    }
    if (async) {
      calling();
      comm.broadcast_from_host_async(data, recv.get(), bytes + 64, root, stream);
      expect_not_waited(stream, what);
      // Pageable data is the root's to reuse once the call returns.
      if (!pinned) std::fill(pageable.begin(), pageable.end(), std::byte{0x5A});
      comm.synchronize(stream);
    } else {
      comm.broadcast_from_host(data, recv.get(), bytes + 64, root);
    }
    const auto got = read(recv);
    expect(got, 0, bytes, seed(root, bytes) + 2, what);
    expect_tail(got, bytes, what);
  }

  // Two stream-ordered broadcast_from_host calls back to back, the first behind a producer of 50 ms on
  // @p stream, with different bytes: the root writes the second's bytes into its segment on the host
  // while the first's copies out of a segment still wait on the GPU (the first call returns before the
  // producer is done; the second prepares its bytes, then its exchange waits on the host for the first
  // call's end, as the header says), so the second must not take the first's segment before the root's
  // stream is past the first. Each recv must hold its own call's bytes.
  // The segment is there only with other ranks on the root's node (not under -n 1 nor separate-nodes:
  // there the root's copy reads the communicator's pinned memory, whose reuse this checks instead).
  void broadcast_from_host_back_to_back(int root, cudaStream_t stream) {
    const std::size_t bytes = (1 << 20) + 7;
    const std::string what = "broadcast_from_host_async twice from " + std::to_string(root);
    DeviceMemory first = make(bytes, std::nullopt);
    DeviceMemory second = make(bytes, std::nullopt);
    std::vector<std::byte> a(comm.rank() == root ? bytes : 0);
    std::vector<std::byte> b(comm.rank() == root ? bytes : 0);
    gpuxfer::pattern::fill_host(a, seed(root, bytes) + 20);
    gpuxfer::pattern::fill_host(b, seed(root, bytes) + 21);
    // The two calls once first, so that the root's staging or segments for two calls at once exist (a first
    // cudaHostAlloc or cudaHostRegister behind the producer could wait for it on the host); then new recvs.
    comm.broadcast_from_host_async(a, first.get(), bytes, root, stream);
    comm.broadcast_from_host_async(b, second.get(), bytes, root, stream);
    comm.synchronize(stream);
    first = make(bytes, std::nullopt);
    second = make(bytes, std::nullopt);
    produce(first.get(), bytes, seed(root, bytes) + 22, long_ns, stream);
    comm.broadcast_from_host_async(a, first.get(), bytes, root, stream);
    expect_not_waited(stream, what + " (the first call)");
    // No check of the second: it waits for the first's end, behind the producer (its own copy may still
    // run when it returns, or may not).
    comm.broadcast_from_host_async(b, second.get(), bytes, root, stream);
    comm.synchronize(stream);
    expect(read(first), 0, bytes, seed(root, bytes) + 20, what + " (the first)");
    expect(read(second), 0, bytes, seed(root, bytes) + 21, what + " (the second)");
  }

  // A blocking operation after a stream-ordered one waits for it, whatever their streams: a
  // broadcast_from_host_async behind a producer of 50 ms, then a blocking gather_to_host from the recv
  // it writes, which must gather the broadcast's bytes on every rank.
  void host_operations_in_order(int root, cudaStream_t stream) {
    const std::size_t bytes = 4099;
    const std::string what = "gather_to_host right after broadcast_from_host_async from " + std::to_string(root);
    DeviceMemory recv = make(bytes, std::nullopt);
    std::vector<std::byte> data(comm.rank() == root ? bytes : 0);
    gpuxfer::pattern::fill_host(data, seed(root, bytes) + 40);
    produce(recv.get(), bytes, seed(root, bytes) + 41, long_ns, stream);
    comm.broadcast_from_host_async(data, recv.get(), bytes, root, stream);
    const auto out = comm.gather_to_host(recv.get(), bytes, root);
    comm.synchronize(stream);
    if (comm.rank() != root) return;
    for (int r = 0; r < comm.world_size(); ++r) {
      ++checks;
      const std::size_t wrong = out.size() != static_cast<std::size_t>(comm.world_size()) || out[r].size() != bytes
                                    ? bytes
                                    : gpuxfer::pattern::count_mismatches_host(out[r].span(), seed(root, bytes) + 40);
      if (wrong != 0)
        fail(what + ": rank " + std::to_string(r) + "'s part: " + std::to_string(wrong) + " wrong bytes");
    }
  }

  // A recv one byte short on rank 0 is refused on every rank, naming rank 0; the communicator stays usable.
  // (Both forms; the stream-ordered one on @p stream.)
  void broadcast_from_host_refused(int root, bool async, cudaStream_t stream) {
    const std::size_t bytes = 4099;
    const std::size_t capacity = comm.rank() == 0 ? bytes - 1 : bytes;
    const std::string what = async ? "broadcast_from_host_async" : "broadcast_from_host";
    DeviceMemory recv(comm.device(), bytes);
    std::vector<std::byte> host(comm.rank() == root ? bytes : 0, std::byte{1});
    ++checks;
    try {
      if (async) {
        comm.broadcast_from_host_async(host, recv.get(), capacity, root, stream);
      } else {
        comm.broadcast_from_host(host, recv.get(), capacity, root);
      }
      fail(what + " into a short recv: not refused");
    } catch (const gpuxfer::Error& e) {
      const bool named = std::string(e.what()).find("rank 0 (4098 bytes)") != std::string::npos;
      if ((e.code() != gpuxfer::Errc::invalid_argument || !named))
        fail(what + " into a short recv: " + e.what());
    }
  }

  void all_gather(std::size_t bytes, bool async, cudaStream_t stream) {
    const std::size_t total = bytes * static_cast<std::size_t>(comm.world_size());
    const std::string what = "all_gather " + std::to_string(bytes);
    DeviceMemory send = make(bytes, seed(comm.rank(), bytes));
    DeviceMemory recv = make(total, std::nullopt);
    if (async) {
      comm.all_gather_async(send.get(), bytes, recv.get(), total, stream);
      comm.synchronize(stream);
    } else {
      comm.all_gather(send.get(), bytes, recv.get(), total);
    }
    const auto got = read(recv);
    for (int r = 0; r < comm.world_size(); ++r) expect(got, r * bytes, bytes, seed(r, bytes), what);
    expect_tail(got, total, what);
  }

  void copy(std::size_t bytes, int src, int dst, bool async, cudaStream_t stream) {
    const std::string what = "copy " + std::to_string(bytes) + " " + std::to_string(src) + "->" + std::to_string(dst);
    DeviceMemory send = make(bytes, seed(src, bytes));
    DeviceMemory recv = make(bytes, std::nullopt);
    if (async) {
      comm.copy_async(src, dst, send.get(), recv.get(), bytes, stream);
      comm.synchronize(stream);
    } else {
      comm.copy(src, dst, send.get(), recv.get(), bytes);
    }
    if (comm.rank() != dst) return;
    const auto got = read(recv);
    expect(got, 0, bytes, seed(src, bytes), what);
    expect_tail(got, bytes, what);
  }
};

// This process's shared segments in /dev/shm ("gpuxfer-<pid>-..."): a root creates them, names them
// after its pid, and must unlink every one once its communicator and the results are gone.
int segments_left() {
  const std::string prefix = "gpuxfer-" + std::to_string(::getpid()) + "-";
  int left = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) ++left;
  }
  return left;
}

void on_nodes_of_their_own() {
  const std::string id = "comm-probe-rank-" + std::to_string(gpuxfer::detail::launch_env_from_process().rank);
  ::setenv("GPUXFER_NODE_ID", id.c_str(), 1);
}

// The producer's kernels and a memset once, so that the first check behind a running producer does not
// see it done for the module's loading (see run_ops).
void warm_up(const Communicator& comm, cudaStream_t stream) {
  DeviceMemory warm(comm.device(), 64);
  gpuxfer::pattern::fill_device_slow(warm.get(), 64, 1, 0, stream);
  cuda_check(cudaMemsetAsync(warm.get(), 0, 64, stream), "the warm-up");
  cuda_check(cudaStreamSynchronize(stream), "the warm-up");
}

int run_ops(bool separate_nodes) {
  if (separate_nodes) on_nodes_of_their_own();
  std::optional<Communicator> comm(Communicator::from_environment());
  cuda_check(cudaSetDevice(comm->device()), "cudaSetDevice");  // the pattern kernels' device
  const int rank = comm->rank();
  const int world = comm->world_size();
  Checker check(*comm);
  // Results of the last gather to each root, kept past the communicator.
  std::vector<std::vector<gpuxfer::HostBuffer>> kept;
  {
    gpuxfer::testing::Stream stream(comm->device());
    // The producer's kernels and a memset run once first: in a cold process, the first check of a call
    // behind a running producer (broadcast_from_host_async of 0 bytes) saw the producer done (the call
    // 50 ms, seen on nvidia-h200). COMM_PROBE_COLD=1 leaves the warm-up out, to see that again;
    // COMM_PROBE_COLD=producer leaves out only the producer's kernels, =memset only the memset.
    const char* cold = std::getenv("COMM_PROBE_COLD");
    const std::string_view left_out = cold == nullptr ? "" : cold;
    DeviceMemory warm(comm->device(), 64);
    if (left_out != "1" && left_out != "producer")
      gpuxfer::pattern::fill_device_slow(warm.get(), 64, 1, 0, stream.get());
    if (left_out != "1" && left_out != "memset")
      cuda_check(cudaMemsetAsync(warm.get(), 0, 64, stream.get()), "the warm-up");
    cuda_check(cudaStreamSynchronize(stream.get()), "the warm-up");
    for (const std::size_t bytes :
         {std::size_t{0}, std::size_t{1}, std::size_t{4099}, std::size_t{(1 << 20) + 7}}) {
      for (const bool async : {true, false}) {
        for (int a = 0; a < world; ++a) {
          check.broadcast(bytes, a, async, stream.get());
          check.gather(bytes, true, a, async, stream.get());
          check.gather(bytes, false, a, async, stream.get());
          check.gather_to_host(bytes, true, a, async, stream.get());
          check.gather_to_host(bytes, false, a, async, stream.get());
          check.broadcast_from_host(bytes, a, false, async, stream.get());
          check.broadcast_from_host(bytes, a, true, async, stream.get());
          for (int b = 0; b < world; ++b) check.copy(bytes, a, b, async, stream.get());
        }
        check.all_gather(bytes, async, stream.get());
      }
    }
    for (int a = 0; a < world; ++a) kept.push_back(check.gather_to_host_reuse(a));
    for (int a = 0; a < world; ++a) {
      check.gather_to_host_async_reuse(a, stream.get());
      check.broadcast_from_host_back_to_back(a, stream.get());
      check.host_operations_in_order(a, stream.get());
    }
    check.broadcast_from_host_refused(world - 1, false, stream.get());
    check.broadcast_from_host_refused(world - 1, true, stream.get());
    check.broadcast(4099, 0, false, stream.get());  // still usable after the refusals
  }
  // The communicator goes first: its results still hold their bytes, and once they go too, no segment
  // of this process is left.
  int checks = check.checks;
  std::vector<std::string> failures = std::move(check.failures);
  comm.reset();
  const auto& mine = kept[static_cast<std::size_t>(rank)];  // the results this rank got as the root
  if (mine.size() == static_cast<std::size_t>(world)) {
    const std::size_t bytes = (1 << 20) + 7;
    ++checks;
    for (int r = 0; r < world; ++r) {
      const auto& buffer = mine[static_cast<std::size_t>(r)];
      const std::uint64_t pattern = seed_of(r, bytes) + 12;
      const std::size_t wrong =
          buffer.size() != bytes ? bytes : gpuxfer::pattern::count_mismatches_host(buffer.span(), pattern);
      if (wrong != 0)
        failures.push_back("gather_to_host's results after the communicator is gone: " +
                           std::to_string(wrong) + " wrong bytes in rank " + std::to_string(r) + "'s");
    }
  }
  kept.clear();
  ++checks;
  const int left = segments_left();
  if (left != 0)
    failures.push_back(std::to_string(left) + " shared segment(s) of this process left in /dev/shm");
  if (!failures.empty()) {
    for (const std::string& f : failures) std::printf("rank %d of %d: FAILED: %s\n", rank, world, f.c_str());
    return 1;
  }
  std::printf("rank %d of %d: no shared segment left\n", rank, world);
  std::printf("rank %d of %d: %d checks passed\n", rank, world, checks);
  return 0;
}

// The operations that need no host wait, captured once into a CUDA graph (broadcast_async from rank 0,
// all_gather_async, copy_async from rank 0 to the last rank) and replayed 100 times, a producer kernel
// writing new bytes (a seed of the replay) into the sources on the same stream before each replay; every
// replay's results counted on the GPU, byte for byte. The operations that wait on the host for an
// exchange (gather_async, gather_to_host_async, broadcast_from_host_async) are refused while the stream
// captures, with Errc::unsupported. Prints "rank R of N: 100 replays verified" and exits 0.
int run_graphs() {
  Communicator comm = Communicator::from_environment();
  cuda_check(cudaSetDevice(comm.device()), "cudaSetDevice");
  const int rank = comm.rank();
  const int world = comm.world_size();
  const int last = world - 1;
  const std::size_t bytes = (1 << 20) + 7;
  const auto total = bytes * static_cast<std::size_t>(world);
  DeviceMemory send(comm.device(), bytes);
  DeviceMemory buffer(comm.device(), bytes);
  DeviceMemory gathered(comm.device(), total);
  DeviceMemory copied(comm.device(), bytes);
  gpuxfer::testing::Stream stream(comm.device());
  const auto seed = [](int r, int replay) { return seed_of(r, 1000 + static_cast<std::size_t>(replay)); };
  std::string failure;

  // Refused while capturing, before anything is queued or exchanged (every rank alike).
  cuda_check(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal), "begin capture");
  const auto refused = [&](const char* what, auto&& call) {
    try {
      call();
      if (failure.empty()) failure = std::string(what) + " while capturing: not refused";
    } catch (const gpuxfer::Error& e) {
      if (e.code() != gpuxfer::Errc::unsupported && failure.empty()) failure = std::string(what) + ": " + e.what();
    }
  };
  refused("gather_async", [&] { (void)comm.gather_async(send.get(), bytes, gathered.get(), total, 0, stream.get()); });
  refused("gather_to_host_async", [&] { (void)comm.gather_to_host_async(send.get(), bytes, 0, stream.get()); });
  refused("broadcast_from_host_async",
          [&] { comm.broadcast_from_host_async({}, buffer.get(), bytes, 0, stream.get()); });
  refused("synchronize", [&] { comm.synchronize(stream.get()); });
  cudaGraph_t empty = nullptr;
  cuda_check(cudaStreamEndCapture(stream.get(), &empty), "end capture");
  if (empty != nullptr) cuda_check(cudaGraphDestroy(empty), "destroy");

  // Each operation once before its capture: NCCL sets up its connections on an operation's first use,
  // which a capture should not have to hold.
  comm.broadcast_async(buffer.get(), bytes, 0, stream.get());
  comm.all_gather_async(send.get(), bytes, gathered.get(), total, stream.get());
  comm.copy_async(0, last, send.get(), copied.get(), bytes, stream.get());
  comm.synchronize(stream.get());
  cuda_check(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal), "begin capture");
  comm.broadcast_async(buffer.get(), bytes, 0, stream.get());
  comm.all_gather_async(send.get(), bytes, gathered.get(), total, stream.get());
  comm.copy_async(0, last, send.get(), copied.get(), bytes, stream.get());
  cudaGraph_t graph = nullptr;
  cuda_check(cudaStreamEndCapture(stream.get(), &graph), "end capture");
  cudaGraphExec_t exec = nullptr;
  cuda_check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");

  int checks = 0;
  const auto expect = [&](const void* data, std::size_t size, std::uint64_t pattern, const std::string& what) {
    ++checks;
    const std::size_t wrong = gpuxfer::pattern::count_mismatches_device(data, size, pattern, 0, stream.get());
    if (wrong != 0 && failure.empty()) failure = what + ": " + std::to_string(wrong) + " wrong bytes";
  };
  constexpr int replays = 100;
  for (int i = 0; i < replays && failure.empty(); ++i) {
    gpuxfer::pattern::fill_device(send.get(), bytes, seed(rank, i), 0, stream.get());
    if (rank == 0) gpuxfer::pattern::fill_device(buffer.get(), bytes, seed(rank, i) + 7, 0, stream.get());
    cuda_check(cudaGraphLaunch(exec, stream.get()), "launch");
    comm.synchronize(stream.get());
    const std::string what = "replay " + std::to_string(i);
    expect(buffer.get(), bytes, seed(0, i) + 7, what + ": broadcast_async");
    for (int r = 0; r < world; ++r) {
      expect(static_cast<const std::byte*>(gathered.get()) + bytes * static_cast<std::size_t>(r), bytes, seed(r, i),
             what + ": all_gather_async, rank " + std::to_string(r) + "'s part");
    }
    if (rank == last) expect(copied.get(), bytes, seed(0, i), what + ": copy_async");
  }
  cuda_check(cudaGraphExecDestroy(exec), "destroy");
  cuda_check(cudaGraphDestroy(graph), "destroy");
  // Still usable after the graph, in its ordinary order.
  gpuxfer::pattern::fill_device(send.get(), bytes, seed(rank, replays), 0, stream.get());
  comm.all_gather_async(send.get(), bytes, gathered.get(), total, stream.get());
  comm.synchronize(stream.get());
  expect(static_cast<const std::byte*>(gathered.get()) + bytes * static_cast<std::size_t>(last), bytes,
         seed(last, replays), "all_gather_async after the graph");
  if (!failure.empty()) {
    std::printf("rank %d of %d: FAILED: %s\n", rank, world, failure.c_str());
    return 1;
  }
  std::printf("rank %d of %d: %d replays verified\n", rank, world, replays);
  std::printf("rank %d of %d: %d checks passed\n", rank, world, checks);
  return 0;
}

// The blocking operations on a second thread while the main thread's stream captures in global mode: CUDA
// refuses the calls it counts unsafe from every thread then (allocations, registrations, event and stream
// waits) and the capture is lost; each step's failure is collected, then every result is counted.
int run_beside_capture(bool with_setup) {
  Communicator comm = Communicator::from_environment();
  cuda_check(cudaSetDevice(comm.device()), "cudaSetDevice");
  const int rank = comm.rank();
  const int world = comm.world_size();
  const std::size_t bytes = (1 << 20) + 7;
  const auto total = bytes * static_cast<std::size_t>(world);
  DeviceMemory send(comm.device(), bytes);
  DeviceMemory buffer(comm.device(), bytes);
  DeviceMemory uploaded(comm.device(), bytes);
  DeviceMemory gathered(comm.device(), total);
  DeviceMemory gathered_async(comm.device(), total);
  DeviceMemory produced(comm.device(), bytes);
  DeviceMemory alone(comm.device(), bytes);
  gpuxfer::testing::Stream captured(comm.device());
  gpuxfer::testing::Stream theirs(comm.device());
  const std::uint64_t mine = seed_of(rank, 2000);
  const std::uint64_t sent = seed_of(0, 2001);
  const std::uint64_t producer = seed_of(rank, 2002);
  std::vector<std::byte> host(bytes);
  gpuxfer::pattern::fill_host(host, seed_of(0, 2003));
  gpuxfer::pattern::fill_device(send.get(), bytes, mine, 0, theirs.get());
  if (rank == 0) gpuxfer::pattern::fill_device(buffer.get(), bytes, sent, 0, theirs.get());
  theirs.synchronize();

  std::vector<std::string> failures;
  std::vector<gpuxfer::HostBuffer> host_results;
  cuda_check(cudaStreamBeginCapture(captured.get(), cudaStreamCaptureModeGlobal), "begin capture");
  gpuxfer::pattern::fill_device(produced.get(), bytes, producer, 0, captured.get());
  std::thread other([&] {
    const auto step = [&](const char* what, auto&& call) {
      try {
        call();
      } catch (const std::exception& e) {
        failures.push_back(std::string(what) + ": " + e.what());
      }
    };
    step("all_gather", [&] { comm.all_gather(send.get(), bytes, gathered.get(), total); });
    step("broadcast", [&] { comm.broadcast(buffer.get(), bytes, 0); });
    step("gather_to_host", [&] { host_results = comm.gather_to_host(send.get(), bytes, 0); });
    step("broadcast_from_host (pageable)", [&] {
      comm.broadcast_from_host(rank == 0 ? std::span<const std::byte>(host) : std::span<const std::byte>{},
                               uploaded.get(), bytes, 0);
    });
    step("all_gather_async and synchronize", [&] {
      comm.all_gather_async(send.get(), bytes, gathered_async.get(), total, theirs.get());
      comm.synchronize(theirs.get());
    });
    if (!with_setup) return;
    step("a new Communicator of one rank, its all_gather and its release", [&] {
      gpuxfer::CommunicatorOptions options;
      options.device = comm.device();
      Communicator solo(0, 1, std::string{}, options);
      solo.all_gather(send.get(), bytes, alone.get(), bytes);
    });
  });
  other.join();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(captured.get(), &graph);
  (void)cudaGetLastError();
  if (ended != cudaSuccess)
    failures.push_back(std::string("the capture ended with ") + cudaGetErrorName(ended));

  int checks = 0;
  const auto expect = [&](const void* data, std::size_t size, std::uint64_t pattern,
                          const std::string& what) {
    ++checks;
    const std::size_t wrong = gpuxfer::pattern::count_mismatches_device(data, size, pattern, 0, theirs.get());
    if (wrong != 0) failures.push_back(what + ": " + std::to_string(wrong) + " wrong bytes");
  };
  if (ended == cudaSuccess) {
    cudaGraphExec_t exec = nullptr;
    cuda_check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
    cuda_check(cudaGraphLaunch(exec, captured.get()), "launch");
    captured.synchronize();
    cuda_check(cudaGraphExecDestroy(exec), "destroy");
    expect(produced.get(), bytes, producer, "the captured producer's output");
  }
  if (graph != nullptr) cuda_check(cudaGraphDestroy(graph), "destroy");
  for (int r = 0; r < world; ++r) {
    const auto offset = bytes * static_cast<std::size_t>(r);
    expect(static_cast<const std::byte*>(gathered.get()) + offset, bytes, seed_of(r, 2000),
           "all_gather, rank " + std::to_string(r) + "'s part");
    expect(static_cast<const std::byte*>(gathered_async.get()) + offset, bytes, seed_of(r, 2000),
           "all_gather_async, rank " + std::to_string(r) + "'s part");
  }
  expect(buffer.get(), bytes, sent, "broadcast");
  if (with_setup) expect(alone.get(), bytes, seed_of(rank, 2000), "the new Communicator's all_gather");
  expect(uploaded.get(), bytes, seed_of(0, 2003), "broadcast_from_host");
  if (rank == 0) {
    for (int r = 0; r < world; ++r) {
      ++checks;
      const auto index = static_cast<std::size_t>(r);
      if (host_results.size() <= index || host_results[index].size() != bytes ||
          gpuxfer::pattern::count_mismatches_host(host_results[index].span(), seed_of(r, 2000), 0) != 0) {
        failures.push_back("gather_to_host, rank " + std::to_string(r) + "'s result");
      }
    }
  }
  if (!failures.empty()) {
    std::string all;
    for (const std::string& f : failures) all += "\n  " + f;
    std::printf("rank %d of %d: FAILED: %zu beside a capture:%s\n", rank, world, failures.size(),
                all.c_str());
    return 1;
  }
  std::printf("rank %d of %d: beside a capture, %d checks passed\n", rank, world, checks);
  return 0;
}

// Prints @p check's failures ("rank R of N: FAILED: ...") and gives 1, else "rank R of N: <what>, C checks
// passed" and 0.
int report(const Checker& check, const char* what) {
  const int rank = check.comm.rank();
  const int world = check.comm.world_size();
  if (!check.failures.empty()) {
    for (const std::string& f : check.failures)
      std::printf("rank %d of %d: FAILED: %s\n", rank, world, f.c_str());
    return 1;
  }
  std::printf("rank %d of %d: %s, %d checks passed\n", rank, world, what, check.checks);
  return 0;
}

int first_host_operation(bool separate_nodes) {
  if (separate_nodes) on_nodes_of_their_own();
  Communicator comm = Communicator::from_environment();
  cuda_check(cudaSetDevice(comm.device()), "cudaSetDevice");
  Checker check(comm);
  {
    gpuxfer::testing::Stream stream(comm.device());
    warm_up(comm, stream.get());
    if (comm.world_size() > 1) {
      check.copy(4099, 1, 0, false, stream.get());
      check.copy(4099, 0, 1, false, stream.get());
    }
    check.gather_to_host((1 << 20) + 7, true, 0, true, stream.get());
  }
  return report(check, "a first host operation");
}

int let_go_behind_producer() {
  Communicator comm = Communicator::from_environment();
  cuda_check(cudaSetDevice(comm.device()), "cudaSetDevice");
  Checker check(comm);
  {
    gpuxfer::testing::Stream stream(comm.device());
    warm_up(comm, stream.get());
    for (std::size_t mib = 1; mib <= 4; ++mib) (void)check.gather_salted(mib << 20, 0, 40 + mib);
    constexpr std::size_t bytes = std::size_t{5} << 20;
    const std::string what = "gather_to_host_async of 5 MiB after four other sizes";
    DeviceMemory send;
    const std::uint64_t spin = check.producer_ns(0);
    const auto out = check.gather_salted_async(bytes, 0, 45, spin, stream.get(), send);
    if (spin > 0) check.expect_not_waited(stream.get(), what);
    comm.synchronize(stream.get());
    check.expect_salted(out, bytes, 0, 45, what);
  }
  return report(check, "letting go of segments");
}

int fail_part_way(const std::string& operation) {
  on_nodes_of_their_own();
  Communicator comm = Communicator::from_environment();
  cuda_check(cudaSetDevice(comm.device()), "cudaSetDevice");
  constexpr std::size_t bytes = std::size_t{16} << 20;
  DeviceMemory buffer(comm.device(), bytes);
  cuda_check(cudaMemset(buffer.get(), 1, bytes), "fill");
  std::vector<std::byte> data(comm.rank() == 0 ? bytes : 0, std::byte{2});
  const bool gather = operation == "gather";
  const auto call = [&] {
    if (gather) {
      (void)comm.gather_to_host(buffer.get(), bytes, 0);
    } else {
      comm.broadcast_from_host(data, buffer.get(), bytes, 0);
    }
  };
  call();  // once whole, so that the failure comes in a call whose set-up (segments, staging, connections) is
           // done
  if (comm.rank() == 1) {
    ::setenv(gather ? "GPUXFER_TEST_FAIL_NCCL_SEND" : "GPUXFER_TEST_FAIL_NCCL_RECV", gather ? "2" : "1", 1);
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    call();
  } catch (const gpuxfer::Error& e) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank %d of %d: failed after %.0f ms: %s\n", comm.rank(), comm.world_size(), ms, e.what());
    if (comm.rank() == 1 && std::getenv("COMM_PROBE_CALL_AGAIN") != nullptr) {
      try {
        call();
        std::printf("rank %d of %d: the call again did not fail\n", comm.rank(), comm.world_size());
      } catch (const gpuxfer::Error& again) {
        std::printf("rank %d of %d: the call again: %s\n", comm.rank(), comm.world_size(), again.what());
      }
    }
    return 1;
  }
  std::printf("rank %d of %d: the call did not fail\n", comm.rank(), comm.world_size());
  return comm.rank() == 1 ? 2 : 0;
}

int exit_early(int leaver) {
  const auto env = gpuxfer::detail::launch_env_from_process();
  if (env.rank == leaver) {
    // Joins the rendezvous (rank 0's blob is its NCCL id when rank 0 stays), then leaves before NCCL.
    ncclUniqueId id{};
    if (env.rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) return 3;
    (void)gpuxfer::detail::exchange_blob(env, std::string(reinterpret_cast<const char*>(&id), sizeof(id)));
    std::printf("rank %d leaves before joining NCCL\n", env.rank);
    return 0;
  }
  Communicator comm = Communicator::from_environment();
  std::printf("rank %d: created a communicator without rank %d\n", comm.rank(), leaver);
  return 0;
}

// Every rank on device 0: the rendezvous refuses the job before NCCL sees it, naming two ranks and the GPU.
int release_after_timeout() {
  constexpr std::uint64_t kernel_ns = 15'000'000'000;
  constexpr double bound_ms = 8000;  // GPUXFER_TIMEOUT (2 s in the test) and a margin, far below the kernel
  constexpr std::size_t bytes = std::size_t{1} << 20;
  std::optional<Communicator> comm(Communicator::from_environment());
  cuda_check(cudaSetDevice(comm->device()), "cudaSetDevice");
  DeviceMemory recv(comm->device(), bytes);
  DeviceMemory spun(comm->device(), 64);
  const std::vector<std::byte> data(bytes, std::byte{3});
  comm->broadcast_from_host(data, recv.get(), bytes, 0);  // once whole: staging and segments made
  gpuxfer::pattern::fill_device_slow(spun.get(), 64, 1, kernel_ns, cudaStreamLegacy);
  using ms = std::chrono::duration<double, std::milli>;
  auto start = std::chrono::steady_clock::now();
  std::string thrown = "nothing";
  try {
    comm->broadcast_from_host(data, recv.get(), bytes, 0);
  } catch (const gpuxfer::Error& e) {
    thrown = e.code() == gpuxfer::Errc::comm_error ? "comm_error" : e.what();
  }
  const double failed_ms = ms(std::chrono::steady_clock::now() - start).count();
  start = std::chrono::steady_clock::now();
  comm.reset();
  const double released_ms = ms(std::chrono::steady_clock::now() - start).count();
  const bool ok = thrown == "comm_error" && failed_ms < bound_ms && released_ms < bound_ms;
  std::printf(
      "rank 0 of 1: %s after a timeout: the call threw %s after %.0f ms, the release took %.0f ms (the "
      "kernel spins %.0f ms)\n",
      ok ? "released" : "FAILED: not released in time", thrown.c_str(), failed_ms, released_ms,
      static_cast<double>(kernel_ns) / 1e6);
  std::fflush(stdout);
  return ok ? 0 : 1;  // recv and spun are freed after the kernel: cudaFree waits for it
}

int one_gpu() {
  gpuxfer::CommunicatorOptions options;
  options.device = 0;
  const Communicator comm = Communicator::from_environment(options);
  std::printf("rank %d: created a communicator with every rank on device 0\n", comm.rank());
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "ops") return run_ops(argc > 2 && std::string(argv[2]) == "separate-nodes");
  if (mode == "graphs") return run_graphs();
  if (mode == "beside-capture") return run_beside_capture(argc > 2 && std::string(argv[2]) == "setup");
  if (mode == "exit-early" && argc > 2) return exit_early(std::atoi(argv[2]));
  if (mode == "one-gpu") return one_gpu();
  if (mode == "first-host-op")
    return first_host_operation(argc > 2 && std::string(argv[2]) == "separate-nodes");
  if (mode == "let-go-behind-producer") return let_go_behind_producer();
  if (mode == "fail-part-way" && argc > 2) return fail_part_way(argv[2]);
  if (mode == "release-after-timeout") return release_after_timeout();
  std::fprintf(stderr, "comm_probe: unknown mode '%s'\n", mode.c_str());
  return 2;
} catch (const gpuxfer::Error& e) {
  std::printf("comm_probe: %s\n", e.what());
  return 1;
} catch (const std::exception& e) {
  std::printf("comm_probe: %s\n", e.what());
  return 1;
}
