// NCCL communicators over the manager's devices: created on first use (ncclCommInitAll costs hundreds of
// milliseconds), then cached for the manager's lifetime.
#pragma once

#include <mutex>
#include <vector>

#include <nccl.h>

namespace gpuxfer::detail {

class NcclComms {
 public:
  NcclComms() = default;
  ~NcclComms();
  NcclComms(const NcclComms&) = delete;
  NcclComms& operator=(const NcclComms&) = delete;

  /// One communicator per ordinal in @p ordinals (rank i is ordinals[i]), created on the first call.
  /// @throws Error(Errc::nccl_error) when NCCL cannot create them
  const std::vector<ncclComm_t>& get(const std::vector<int>& ordinals);

  /// Serialises launches on the communicators: NCCL requires one group at a time per communicator.
  [[nodiscard]] std::mutex& launch_mutex() noexcept { return launch_mutex_; }

 private:
  std::mutex mutex_;
  std::mutex launch_mutex_;
  std::vector<ncclComm_t> comms_;
};

}  // namespace gpuxfer::detail
