#include "bootstrap/rendezvous.hpp"

#include <mutex>

#include <gpuxfer/error.hpp>

#include "bootstrap/file_rendezvous.hpp"
#include "bootstrap/tcp_rendezvous.hpp"
#include "runtime/log.hpp"

namespace gpuxfer::detail {
namespace {

// Once per process: what a rendezvous without a secret lets any process that reaches it (the port, or
// the folder of the file) do.
void warn_without_secret(const LaunchEnv& env) {
  static std::once_flag warned;
  std::call_once(warned, [&] {
    GPUXFER_LOG(warn,
                "rendezvous: no GPUXFER_SECRET or GPUXFER_SECRET_FILE is set, so the ranks cannot tell "
                "each other from any process that reaches " +
                    env.init.to_string() +
                    ": such a process can join as a rank and read rank 0's NCCL id, fail the job, or "
                    "pose as rank 0 and hand the ranks an id of its own. `gpuxfer launch` sets one; "
                    "README (Across processes and nodes) says how with other launchers");
  });
}

}  // namespace

std::string exchange_blob(const LaunchEnv& env, const std::string& blob) {
  if (env.world_size == 1) return blob;
  switch (env.init.kind) {
    case InitAddress::Kind::tcp:
      if (env.secret.empty()) warn_without_secret(env);
      if (env.rank == 0) {
        serve_tcp_rendezvous(env, blob);
        return blob;
      }
      return join_tcp_rendezvous(env);
    case InitAddress::Kind::file:
      if (env.secret.empty()) warn_without_secret(env);
      return file_rendezvous(env, blob);
    case InitAddress::Kind::none:
      break;
  }
  throw Error(Errc::invalid_option,
              "a world of " + std::to_string(env.world_size) +
                  " ranks needs a rendezvous address: set GPUXFER_INIT or MASTER_ADDR/MASTER_PORT");
}

void RankList::add(int rank) {
  if (!runs_.empty() && runs_.back().second + 1 == rank) {
    runs_.back().second = rank;
  } else {
    runs_.emplace_back(rank, rank);
  }
}

std::string RankList::describe() const {
  constexpr std::size_t shown = 8;
  const bool one = runs_.size() == 1 && runs_[0].first == runs_[0].second;
  std::string text = one ? "rank " : "ranks ";
  for (std::size_t i = 0; i < runs_.size() && i < shown; ++i) {
    const auto [first, last] = runs_[i];
    if (i > 0) text += i + 1 == runs_.size() ? " and " : ", ";
    text += std::to_string(first);
    if (last > first) text += (last == first + 1 ? " and " : " to ") + std::to_string(last);
  }
  if (runs_.size() > shown) {
    int more = 0;
    for (std::size_t i = shown; i < runs_.size(); ++i) more += runs_[i].second - runs_[i].first + 1;
    text += " and " + std::to_string(more) + " more";
  }
  return text;
}

std::string two_ranks_on_one_gpu(const std::string& who, const std::string& other, const std::string& gpu) {
  return who + " and " + other + " both drive " + gpu +
         ": every rank needs a GPU of its own (its local rank picks it: GPUXFER_LOCAL_RANK, LOCAL_RANK, "
         "OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID; or CommunicatorOptions::device)";
}

}  // namespace gpuxfer::detail
