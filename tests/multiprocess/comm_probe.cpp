// One rank of a Communicator test job, started alone (a world of one) or by `gpuxfer launch -n N`:
//   ops              every operation, stream-ordered (then synchronize) and blocking, sizes 0, 1, 4099 and
//                    1 MiB + 7 (gather and gather_to_host: different sizes per rank too, 0 among them;
//                    broadcast_from_host from pageable and pinned host memory, and a recv too small refused
//                    on every rank), every byte compared; prints
//                    "rank R of N: C checks passed" and exits 0, else prints the first mismatch and exits 1
//   ops separate-nodes
//                    as ops, each rank on a node of its own (GPUXFER_NODE_ID=comm-probe-rank-R): gather_to_host
//                    and broadcast_from_host take the path between nodes (NCCL with the root's GPU) instead
//                    of the shared segment
//   exit-early R     rank R joins the rendezvous (rank 0 with a real NCCL id) and exits before NCCL; the others create their
//                    Communicator, which must fail (exit 1, printing the error)
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <cstring>
#include <string>
#include <vector>

#include <nccl.h>

#include <gpuxfer/communicator.hpp>
#include <gpuxfer/error.hpp>
#include <gpuxfer/testing/cuda_check.hpp>
#include <gpuxfer/testing/cuda_resources.hpp>
#include <gpuxfer/testing/pattern.hpp>

#include "comm/launch_env.hpp"
#include "comm/rendezvous.hpp"

namespace {

using gpuxfer::Communicator;
using gpuxfer::testing::DeviceMemory;
using gpuxfer::testing::cuda_check;
constexpr std::byte poison{0xA5};

struct Checker {
  Communicator& comm;
  int checks = 0;
  std::string first_failure;

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
    if (wrong != 0 && first_failure.empty()) first_failure = what + ": " + std::to_string(wrong) + " wrong bytes";
  }
  void expect_tail(const std::vector<std::byte>& got, std::size_t end, const std::string& what) {
    for (std::size_t i = end; i < end + 64; ++i) {
      if (got[i] != poison && first_failure.empty()) first_failure = what + ": wrote past the end";
    }
  }
  std::uint64_t seed(int rank, std::size_t bytes) const { return gpuxfer::pattern::seed_for(bytes + 17, rank); }

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
    if (pieces.size() != static_cast<std::size_t>(comm.world_size()) && first_failure.empty())
      first_failure = what + ": " + std::to_string(pieces.size()) + " pieces";
    if (comm.rank() != root) return;
    const auto got = read(recv);
    std::size_t offset = 0;
    for (int r = 0; r < comm.world_size(); ++r) {
      if (pieces[r].offset != offset || pieces[r].size != size_of(r)) first_failure = what + ": wrong piece";
      expect(got, offset, size_of(r), seed(r, size_of(r)), what + ", rank " + std::to_string(r) + "'s part");
      offset += size_of(r);
    }
    expect_tail(got, total, what);
  }

  // gather_to_host: on the root one HostBuffer per rank holding exactly that rank's bytes, elsewhere none.
  // The send buffer is filled on the legacy default stream just before (cudaMemcpyAsync, not waited):
  // the gather must start after it.
  void gather_to_host(std::size_t base, bool equal, int root) {
    const auto size_of = [&](int r) { return equal ? base : base + 3 * static_cast<std::size_t>(r); };
    const std::size_t mine = size_of(comm.rank());
    const std::string what = "gather_to_host " + std::to_string(mine) + " to " + std::to_string(root);
    DeviceMemory send(comm.device(), mine + 64);
    std::vector<std::byte> host(mine);
    gpuxfer::pattern::fill_host(host, seed(comm.rank(), mine) + 1);
    if (mine > 0) cuda_check(cudaMemcpyAsync(send.get(), host.data(), mine, cudaMemcpyHostToDevice, 0), "fill");
    const auto out = comm.gather_to_host(send.get(), mine, root);
    cuda_check(cudaStreamSynchronize(0), "the fill");
    ++checks;
    if (comm.rank() != root) {
      if (!out.empty() && first_failure.empty()) first_failure = what + ": a non-root rank got buffers";
      return;
    }
    if (out.size() != static_cast<std::size_t>(comm.world_size())) {
      if (first_failure.empty()) first_failure = what + ": " + std::to_string(out.size()) + " buffers";
      return;
    }
    for (int r = 0; r < comm.world_size(); ++r) {
      ++checks;
      const std::string part = what + ", rank " + std::to_string(r) + "'s buffer";
      if (out[r].size() != size_of(r)) {
        if (first_failure.empty()) first_failure = part + ": " + std::to_string(out[r].size()) + " bytes";
        continue;
      }
      const std::size_t wrong = gpuxfer::pattern::count_mismatches_host(out[r].span(), seed(r, size_of(r)) + 1);
      if (wrong != 0 && first_failure.empty()) first_failure = part + ": " + std::to_string(wrong) + " wrong bytes";
    }
  }

  // broadcast_from_host: the root's host bytes (pageable or pinned) into every rank's recv of bytes + 64
  // (the 64 past the size must stay poisoned). The recv is poisoned, and pinned data filled from the
  // device, on the legacy default stream just before (not waited): the broadcast must start after both.
  void broadcast_from_host(std::size_t bytes, int root, bool pinned) {
    const std::string what = "broadcast_from_host " + std::to_string(bytes) + " from " + std::to_string(root) +
                             (pinned ? " (pinned)" : " (pageable)");
    DeviceMemory recv(comm.device(), bytes + 64);
    cuda_check(cudaMemsetAsync(recv.get(), static_cast<int>(poison), bytes + 64, 0), "poison");
    std::vector<std::byte> pageable;
    gpuxfer::testing::PinnedMemory locked;
    DeviceMemory source;
    std::span<const std::byte> data;
    if (comm.rank() == root) {
      if (pinned) {
        // Pattern on the device, copied into the pinned data on the legacy default stream.
        locked = gpuxfer::testing::PinnedMemory(bytes);
        std::vector<std::byte> pattern(bytes);
        gpuxfer::pattern::fill_host(pattern, seed(root, bytes) + 2);
        source = DeviceMemory(comm.device(), bytes + 1);
        cuda_check(cudaMemcpy(source.get(), pattern.data(), bytes, cudaMemcpyHostToDevice), "fill");
        cuda_check(cudaMemcpyAsync(locked.data(), source.get(), bytes, cudaMemcpyDeviceToHost, 0), "fill");
        data = locked.span();
      } else {
        pageable.resize(bytes);
        gpuxfer::pattern::fill_host(pageable, seed(root, bytes) + 2);
        data = pageable;
      }
    }
    comm.broadcast_from_host(data, recv.get(), bytes + 64, root);
    const auto got = read(recv);
    expect(got, 0, bytes, seed(root, bytes) + 2, what);
    expect_tail(got, bytes, what);
  }

  // A recv one byte short on rank 0 is refused on every rank, naming rank 0; the communicator stays usable.
  void broadcast_from_host_refused(int root) {
    const std::size_t bytes = 4099;
    const std::size_t capacity = comm.rank() == 0 ? bytes - 1 : bytes;
    DeviceMemory recv(comm.device(), bytes);
    std::vector<std::byte> host(comm.rank() == root ? bytes : 0, std::byte{1});
    ++checks;
    try {
      comm.broadcast_from_host(host, recv.get(), capacity, root);
      if (first_failure.empty()) first_failure = "broadcast_from_host into a short recv: not refused";
    } catch (const gpuxfer::Error& e) {
      const bool named = std::string(e.what()).find("rank 0 (4098 bytes)") != std::string::npos;
      if ((e.code() != gpuxfer::Errc::invalid_argument || !named) && first_failure.empty())
        first_failure = std::string("broadcast_from_host into a short recv: ") + e.what();
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

int run_ops(bool separate_nodes) {
  if (separate_nodes) {
    const std::string id = "comm-probe-rank-" + std::to_string(gpuxfer::detail::launch_env_from_process().rank);
    ::setenv("GPUXFER_NODE_ID", id.c_str(), 1);
  }
  Communicator comm = Communicator::from_environment();
  gpuxfer::testing::Stream stream(comm.device());
  Checker check{comm, 0, {}};
  for (const std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4099}, std::size_t{(1 << 20) + 7}}) {
    for (const bool async : {true, false}) {
      for (int a = 0; a < comm.world_size(); ++a) {
        check.broadcast(bytes, a, async, stream.get());
        check.gather(bytes, true, a, async, stream.get());
        check.gather(bytes, false, a, async, stream.get());
        if (async) {
          check.gather_to_host(bytes, true, a);
          check.gather_to_host(bytes, false, a);
          check.broadcast_from_host(bytes, a, false);
          check.broadcast_from_host(bytes, a, true);
        }
        for (int b = 0; b < comm.world_size(); ++b) check.copy(bytes, a, b, async, stream.get());
      }
      check.all_gather(bytes, async, stream.get());
    }
  }
  check.broadcast_from_host_refused(comm.world_size() - 1);
  check.broadcast(4099, 0, false, stream.get());  // still usable after the refusal
  if (!check.first_failure.empty()) {
    std::printf("rank %d of %d: FAILED: %s\n", comm.rank(), comm.world_size(), check.first_failure.c_str());
    return 1;
  }
  std::printf("rank %d of %d: %d checks passed\n", comm.rank(), comm.world_size(), check.checks);
  return 0;
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

}  // namespace

int main(int argc, char** argv) try {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "ops") return run_ops(argc > 2 && std::string(argv[2]) == "separate-nodes");
  if (mode == "exit-early" && argc > 2) return exit_early(std::atoi(argv[2]));
  std::fprintf(stderr, "comm_probe: unknown mode '%s'\n", mode.c_str());
  return 2;
} catch (const gpuxfer::Error& e) {
  std::printf("comm_probe: %s\n", e.what());
  return 1;
} catch (const std::exception& e) {
  std::printf("comm_probe: %s\n", e.what());
  return 1;
}
