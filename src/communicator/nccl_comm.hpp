// One rank's NCCL communicator across processes: created non-blocking, every wait on it bounded by the
// job's timeout and polling ncclCommGetAsyncError, aborted on a timeout or an error, so that a dead or
// absent peer makes this rank throw instead of hang.
#pragma once

#include <chrono>
#include <string>
#include <utility>

#include <nccl.h>

#include "runtime/event.hpp"

namespace gpuxfer::detail {

/// "rank 1", "one of ranks 0, 2, 3" (NCCL does not say which): the peers of @p rank in a world of
/// @p world_size, for messages.
[[nodiscard]] std::string other_ranks(int rank, int world_size);

class NcclComm {
 public:
  NcclComm() noexcept = default;
  /// ncclCommInitRankConfig with config.blocking = 0 under @p device, polled until the communicator is
  /// ready. @p where names this rank in messages ("rank 1 of 2 (device 1)").
  /// @throws Error(Errc::comm_error) naming the ranks that did not join, after @p timeout, or when NCCL
  ///         fails (the half-made communicator aborted)
  NcclComm(const ncclUniqueId& id, int rank, int world_size, int device, std::chrono::milliseconds timeout,
           std::string where);
  /// Finalises within the timeout (ncclCommFinalize, polled), else aborts; then destroys. Never throws.
  ~NcclComm();
  NcclComm(NcclComm&& other) noexcept { *this = std::move(other); }
  NcclComm& operator=(NcclComm&& other) noexcept;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  [[nodiscard]] ncclComm_t get() const noexcept { return comm_; }
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }

  /// False once the communicator was aborted (by an earlier failure), or for none.
  [[nodiscard]] bool usable() const noexcept { return comm_ != nullptr && !aborted_; }
  /// @throws Error(Errc::comm_error) when the communicator was aborted (by an earlier failure)
  void check_usable(const std::string& what) const;
  /// What a call returned: nothing for ncclSuccess and ncclInProgress; for a result NCCL gives once a peer,
  /// the network or the system failed (ncclRemoteError, ncclSystemError, ncclInternalError,
  /// ncclUnhandledCudaError) the communicator is aborted and Error(Errc::comm_error) names @p peers, as
  /// for the same failure seen as NCCL's asynchronous error; for the caller's (ncclInvalidArgument,
  /// ncclInvalidUsage) Error(Errc::nccl_error). @p what names the operation.
  void check_call(ncclResult_t result, const std::string& what, const std::string& peers);
  /// Settles a non-blocking call that returned @p launched (check_call), then waits (bounded) while NCCL
  /// says ncclInProgress. @p peers names the ranks the operation waits for.
  /// @throws as check_call; Error(Errc::comm_error), aborting, for an asynchronous error or the timeout
  void settle(ncclResult_t launched, const std::string& what, const std::string& peers);
  /// Waits on the host for @p event, polling NCCL's asynchronous error, at most the timeout.
  /// @throws Error(Errc::comm_error) (aborting), or the CUDA error of the event
  void wait(const Event& event, const std::string& what, const std::string& peers);
  /// As wait, @p stalled saying what held it up should the timeout pass.
  void wait(const Event& event, const std::string& what, const std::string& peers, const std::string& stalled);
  /// Aborts the communicator: its queued operations end, the peers' bounded waits see the failure, and
  /// every later call throws. For a rank that fails after its peers queued work that waits for its own.
  /// Returns at once: ncclCommAbort runs on a thread of its own, since it frees device memory, which waits
  /// for all of the device's work, the caller's too (the process's exit waits for it, at most the
  /// timeout). Never throws.
  void abort() noexcept;

 private:
  template <class Done>
  void poll(Done&& done, const std::string& what, const std::string& peers, const std::string& stalled);
  [[noreturn]] void fail(const std::string& what, const std::string& why);
  void release() noexcept;

  ncclComm_t comm_ = nullptr;
  int device_ = -1;
  std::chrono::milliseconds timeout_{};
  std::string where_;
  bool aborted_ = false;
};

}  // namespace gpuxfer::detail
