// What each cross-process operation's samples do on every rank. The root is rank 0; a copy goes from
// rank 0 to rank 1 (to itself in a world of one, a device copy). Sources hold the pattern of their rank
// and size; the verified sample poisons the destinations first, and every rank counts its own wrong bytes.
#include "rank_ops.hpp"

#include <algorithm>
#include <memory>

#include <gpuxfer/error.hpp>

#include "rank_bench.hpp"

namespace gpuxfer::bench {
namespace {

const ByteRule all_ranks{"size x ranks (total bytes moved)", bytes_all_devices};
const ByteRule payload{"size (the payload: bytes / time)", bytes_payload};

// Counts the wrong bytes of @p pieces in the root's @p capacity bytes: one piece per rank of @p size, each
// checked by @p check_piece where it may be; a missing or misplaced piece counts as entirely wrong.
template <class CheckPiece>
std::size_t check_pieces(const RankBench& b, const std::vector<GatherPiece>& pieces, std::size_t capacity,
                         std::size_t size, CheckPiece&& check_piece) {
  std::size_t wrong = pieces.size() == b.world() ? 0 : capacity;
  for (const GatherPiece& p : pieces)
    wrong += p.size == size && p.offset + size <= capacity ? check_piece(p) : size;
  return wrong;
}

Stats gather_to_host(RankBench& b, std::size_t size) {
  auto results = std::make_shared<std::vector<HostBuffer>>();
  return b.measure({.prepare =
                        [&b, results, size](bool verify) {
                          // Dropped before the next call, so that it reuses their shared segment.
                          results->clear();
                          if (verify) b.fill(b.src(), size, RankBench::seed(size, b.rank()));
                          b.synchronize();
                        },
                    .work = [&b, results, size] { *results = b.comm().gather_to_host(b.src(), size, 0); },
                    .check =
                        [&b, results, size] {
                          if (!b.root()) return results->empty() ? std::size_t{0} : size;
                          std::size_t wrong = results->size() == b.world() ? 0 : b.world() * size;
                          for (std::size_t r = 0; r < std::min(results->size(), b.world()); ++r) {
                            const std::span<std::byte> part = (*results)[r].span();
                            wrong +=
                                part.size() == size ? b.check_host(part, RankBench::seed(size, r)) : size;
                            // Left poisoned for the next call, which reuses this memory: a later gather that
                            // fails to write a part is not hidden.
                            parallel_poison(b.threads(), part);
                          }
                          return wrong;
                        }});
}

Stats gather_to_root(RankBench& b, std::size_t size) {
  const std::size_t capacity = b.world() * size;
  std::vector<GatherPiece> pieces;
  return b.measure({.prepare =
                        [&](bool verify) {
                          if (verify) {
                            b.fill(b.src(), size, RankBench::seed(size, b.rank()));
                            if (b.root()) b.poison(b.dst(), capacity);
                          }
                          b.synchronize();
                        },
                    .work = [&] { pieces = b.comm().gather(b.src(), size, b.dst(), capacity, 0); },
                    .check = [&]() -> std::size_t {
                      if (!b.root()) return 0;
                      return check_pieces(b, pieces, capacity, size, [&](const GatherPiece& p) {
                        return b.check_device(b.dst() + p.offset, size, RankBench::seed(size, p.device));
                      });
                    }});
}

Stats bcast_from_host(RankBench& b, std::size_t size) {
  const std::span<const std::byte> data = b.host_data().first(b.root() ? size : 0);
  const std::uint64_t seed = RankBench::seed(size, b.world());
  return b.measure({.prepare =
                        [&](bool verify) {
                          if (verify) {
                            if (b.root()) parallel_fill(b.threads(), b.host_data().first(size), seed);
                            b.poison(b.dst(), size);
                          }
                          b.synchronize();
                        },
                    .work = [&] { b.comm().broadcast_from_host(data, b.dst(), size, 0); },
                    .check = [&] { return b.check_device(b.dst(), size, seed); }});
}

// ncclBroadcast in place: the root's src() into every other rank's dst(); the root's must stay unchanged.
Stats bcast_device(RankBench& b, std::size_t size) {
  std::byte* buffer = b.root() ? b.src() : b.dst();
  const std::uint64_t seed = RankBench::seed(size, 0);
  return b.measure({.prepare =
                        [&](bool verify) {
                          if (verify && b.root()) b.fill(buffer, size, seed);
                          if (verify && !b.root()) b.poison(buffer, size);
                          b.synchronize();
                        },
                    .work = [&] { b.comm().broadcast(buffer, size, 0); },
                    .check = [&] { return b.check_device(buffer, size, seed); }});
}

Stats all_gather(RankBench& b, std::size_t size) {
  const std::size_t capacity = b.world() * size;
  return b.measure({.prepare =
                        [&](bool verify) {
                          if (verify) {
                            b.fill(b.src(), size, RankBench::seed(size, b.rank()));
                            b.poison(b.dst(), capacity);
                          }
                          b.synchronize();
                        },
                    .work = [&] { b.comm().all_gather(b.src(), size, b.dst(), capacity); },
                    .check =
                        [&] {
                          std::size_t wrong = 0;
                          for (std::size_t r = 0; r < b.world(); ++r)
                            wrong += b.check_device(b.dst() + r * size, size, RankBench::seed(size, r));
                          return wrong;
                        }});
}

Stats copy(RankBench& b, std::size_t size) {
  const int to = std::min(1, static_cast<int>(b.world()) - 1);
  const std::uint64_t seed = RankBench::seed(size, 0);
  return b.measure({.prepare =
                        [&](bool verify) {
                          if (verify && b.root()) b.fill(b.src(), size, seed);
                          if (verify && b.rank() == to) b.poison(b.dst(), size);
                          b.synchronize();
                        },
                    .work = [&] { b.comm().copy(0, to, b.src(), b.dst(), size); },
                    .check = [&] { return b.rank() == to ? b.check_device(b.dst(), size, seed) : 0; }});
}

// ncclAllGather in one process over every device (communicators from ncclCommInitAll), each device's src
// into a buffer of devices x size of its own: the reference of the ranks' all-gather.
std::optional<Stats> nccl_all_gather(Bench& b, std::size_t size) {
  const std::vector<std::size_t> devices = b.all_devices();
  const std::size_t capacity = devices.size() * size;
  std::vector<DeviceMemory> recv;
  for (const std::size_t d : devices) recv.emplace_back(b.ordinal(d), capacity);
  const NcclComms& comms = b.nccl();
  return b.measure({.prepare =
                        [&](std::uint64_t run) {
                          for (const std::size_t d : devices) {
                            b.fill_device(d, b.src(d), size, Bench::seed(run, d));
                            b.poison_device(d, recv[d].get(), capacity);
                          }
                          b.synchronize();
                        },
                    .work =
                        [&] {
                          nccl_group(devices, "ncclAllGather", [&](std::size_t d) {
                            return ncclAllGather(b.src(d), recv[d].get(), size, ncclUint8, comms.get(d),
                                                 b.stream(d));
                          });
                        },
                    .check =
                        [&](std::uint64_t run) {
                          std::size_t wrong = 0;
                          for (const std::size_t d : devices) {
                            for (const std::size_t k : devices)
                              wrong += b.check_device(d, recv[d].get() + k * size, size, Bench::seed(run, k));
                          }
                          return wrong;
                        },
                    .gated = devices});
}

const OpSpec nccl_all_gather_reference{
    .name = "ceiling_nccl_all_gather",
    .kind = Kind::ceiling,
    .what =
        "raw ncclAllGather over every device in one process, communicators from ncclCommInitAll, warm "
        "(events, spin gate)",
    .bytes = all_ranks,
    .waive = needs_nccl,
    .run = nccl_all_gather};

RankOp rank_op(const char* name, std::string what, const ByteRule& bytes, const char* reference,
               std::function<Stats(RankBench&, std::size_t)> run,
               std::optional<double> target = std::nullopt) {
  return {.spec = {.name = name,
                   .what = std::move(what),
                   .bytes = bytes,
                   .ceiling = {reference},
                   .target = target},
          .run = std::move(run)};
}

}  // namespace

const std::vector<RankOp>& rank_ops() {
  static const std::vector<RankOp> ops{
      rank_op("rank_gather_to_host",
              "Communicator::gather_to_host(root 0): every rank's buffer into HostBuffers on rank 0 "
              "(steady_clock, "
              "slowest rank); issue 11: >= 0.95 x in-process gather_all",
              all_ranks, "gather", gather_to_host, 0.95),
      rank_op("rank_gather",
              "Communicator::gather(root 0): every rank's buffer concatenated in rank 0's device memory",
              all_ranks, "gather_to_device", gather_to_root),
      rank_op(
          "rank_bcast_from_host",
          "Communicator::broadcast_from_host(root 0): rank 0's pinned host bytes into every rank's buffer",
          payload, "bcast_pinned", bcast_from_host),
      rank_op("rank_bcast",
              "Communicator::broadcast(root 0): rank 0's device buffer into every rank's (in place)", payload,
              "bcast_device", bcast_device),
      rank_op("rank_all_gather",
              "Communicator::all_gather: every rank's buffer into every rank's, in rank order", all_ranks,
              "ceiling_nccl_all_gather", all_gather),
      rank_op("rank_copy",
              "Communicator::copy(0 -> 1): rank 0's buffer into rank 1's (a device copy with one rank)",
              payload, "copy_peer", copy),
  };
  return ops;
}

std::vector<const RankOp*> select_rank_ops(const std::vector<std::string>& names) {
  std::vector<const RankOp*> selected;
  for (const std::string& name : names) {
    const auto found = std::find_if(rank_ops().begin(), rank_ops().end(),
                                    [&](const RankOp& op) { return op.spec.name == name; });
    if (found == rank_ops().end()) {
      std::string known;
      for (const RankOp& op : rank_ops()) known += (known.empty() ? "" : ",") + op.spec.name;
      throw Error(Errc::invalid_option,
                  "--ops: unknown operation '" + name + "' with --ranks; known: " + known);
    }
  }
  for (const RankOp& op : rank_ops()) {
    if (names.empty() || std::find(names.begin(), names.end(), op.spec.name) != names.end())
      selected.push_back(&op);
  }
  return selected;
}

std::vector<OpSpec> rank_references(const std::vector<const RankOp*>& ops) {
  std::vector<OpSpec> references;
  for (const RankOp* op : ops) {
    const std::string& name = op->spec.ceiling.front();
    if (std::any_of(references.begin(), references.end(), [&](const OpSpec& r) { return r.name == name; }))
      continue;
    const auto found =
        std::find_if(all_ops().begin(), all_ops().end(), [&](const OpSpec& o) { return o.name == name; });
    if (found == all_ops().end() && name != nccl_all_gather_reference.name)
      throw Error(Errc::invalid_option,
                  op->spec.name + ": no operation '" + name + "' to measure it against");
    OpSpec reference = found != all_ops().end() ? *found : nccl_all_gather_reference;
    reference.ceiling.clear();
    reference.bound.clear();
    reference.stream_bound.clear();
    reference.target.reset();
    reference.one_device_target.reset();
    references.push_back(std::move(reference));
  }
  return references;
}

}  // namespace gpuxfer::bench
