// The bootstrap of a job of several processes: every rank gets the same opaque blob from rank 0 (an NCCL
// unique id, next), over the rendezvous that the launch environment names.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/launch_env.hpp"

namespace gpuxfer::detail {

/// Hands every rank @p blob as rank 0 has it (on the other ranks @p blob is not read), over TCP or a
/// shared file as @p env.init says; a single process gets @p blob back at once. Returns only when every
/// rank has joined (TCP) or rank 0 has seen every rank's claim (file), so it doubles as a barrier.
/// @throws Error(Errc::comm_error) for the failures listed in tcp_rendezvous.hpp and file_rendezvous.hpp,
///         each within @p env.timeout; Error(Errc::invalid_option) for a world of several without address
[[nodiscard]] std::string exchange_blob(const LaunchEnv& env, const std::string& blob);

/// Ranks named in an error, added in ascending order and described as runs, so that a large world's
/// message stays short: "rank 2", "ranks 1 to 4, 6 and 9 to 99999".
class RankList {
 public:
  void add(int rank);
  [[nodiscard]] bool empty() const { return runs_.empty(); }
  [[nodiscard]] std::string describe() const;

 private:
  std::vector<std::pair<int, int>> runs_;  ///< first and last rank of each run
};

/// The error of two ranks that would drive one GPU: @p who (the later) and @p other, both on @p gpu.
[[nodiscard]] std::string two_ranks_on_one_gpu(const std::string& who, const std::string& other,
                                               const std::string& gpu);

}  // namespace gpuxfer::detail
