#include "communicator/nccl_comm.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <gpuxfer/detail/device_guard.hpp>
#include <gpuxfer/error.hpp>

#include "bootstrap/deadline.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/log.hpp"

namespace gpuxfer::detail {
namespace {

// The aborts still running, each on a thread of its own: ncclCommAbort frees the communicator's device
// memory, and freeing waits for all of the device's work, the caller's too, which may not end for a long
// time (a kernel of the caller's that waits for a peer that is gone), so the call that failed throws at
// its timeout instead. Never destroyed: a thread may outlive the process's static objects. The process's
// exit waits for those still running, at most the longest of their timeouts (ExitWait).
class Aborts {
 public:
  void start(ncclComm_t comm, int device, std::chrono::milliseconds timeout) noexcept {
    std::lock_guard lock(mutex_);
    try {
      std::thread([this, comm, device] {
        abort_now(comm, device);
        std::lock_guard done(mutex_);
        --running_;
        ended_.notify_all();
      }).detach();
    } catch (...) {  // no thread to be had: aborted here, waiting as it must
      abort_now(comm, device);
      return;
    }
    ++running_;
    longest_ = std::max(longest_, timeout);
  }

  void wait_at_exit() noexcept {
    std::unique_lock lock(mutex_);
    (void)ended_.wait_for(lock, longest_, [&] { return running_ == 0; });
  }

 private:
  static void abort_now(ncclComm_t comm, int device) noexcept {
    const DeviceGuard guard(device, std::nothrow);
    (void)ncclCommAbort(comm);
  }

  std::mutex mutex_;
  std::condition_variable ended_;
  int running_ = 0;
  std::chrono::milliseconds longest_{0};
};

Aborts& aborts() {
  static auto* const running = new Aborts;
  return *running;
}

struct ExitWait {
  ~ExitWait() { aborts().wait_at_exit(); }
} exit_wait;

}  // namespace

std::string other_ranks(int rank, int world_size) {
  if (world_size == 2) return "rank " + std::to_string(1 - rank);
  std::string list;
  for (int r = 0; r < world_size; ++r) {
    if (r == rank) continue;
    list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  return list.empty() ? "no other rank" : "one of ranks " + list + " (NCCL does not say which)";
}

NcclComm::NcclComm(const ncclUniqueId& id, int rank, int world_size, int device,
                   std::chrono::milliseconds timeout, std::string where)
    : device_(device), timeout_(timeout), where_(std::move(where)) {
  DeviceGuard guard(device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  // Non-blocking: NCCL's own waits for the other ranks would have no bound; polled, they have ours.
  config.blocking = 0;
  const ncclResult_t launched = ncclCommInitRankConfig(&comm_, world_size, id, rank, &config);
  const std::string what = "creating the NCCL communicator of " + std::to_string(world_size) + " ranks";
  if (launched != ncclSuccess && launched != ncclInProgress) {
    fail(what, std::string("ncclCommInitRankConfig failed: ") + ncclGetErrorString(launched));
  }
  const std::string peers = other_ranks(rank, world_size);
  poll([](ncclResult_t state) { return state == ncclSuccess; }, what, peers, peers + " did not join");
  GPUXFER_LOG(info, where_ + ": NCCL communicator of " + std::to_string(world_size) + " ranks ready");
}

NcclComm& NcclComm::operator=(NcclComm&& other) noexcept {
  if (this != &other) {
    release();
    comm_ = std::exchange(other.comm_, nullptr);
    device_ = other.device_;
    timeout_ = other.timeout_;
    where_ = std::move(other.where_);
    aborted_ = other.aborted_;
  }
  return *this;
}

NcclComm::~NcclComm() { release(); }

void NcclComm::release() noexcept {
  if (comm_ == nullptr) return;
  DeviceGuard guard(device_, std::nothrow);
  ncclComm_t comm = std::exchange(comm_, nullptr);
  // Finalising waits for the peers' outstanding work; a dead peer would hold it forever: bounded.
  ncclResult_t state = ncclCommFinalize(comm);
  const Deadline deadline(timeout_);
  while (state == ncclInProgress && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) break;
  }
  if (state == ncclSuccess) {
    (void)ncclCommDestroy(comm);
  } else {
    GPUXFER_LOG(warn, where_ + ": the NCCL communicator did not finalise (" + ncclGetErrorString(state) +
                          "); aborting it");
    aborts().start(comm, device_, timeout_);
  }
}

void NcclComm::check_usable(const std::string& what) const {
  if (aborted_ || comm_ == nullptr) {
    throw Error(Errc::comm_error, where_ + ": " + what + ": the communicator was aborted by an earlier failure; "
                                                         "create a new one (every rank must)");
  }
}

void NcclComm::abort() noexcept {
  if (comm_ == nullptr || aborted_) return;
  aborts().start(std::exchange(comm_, nullptr), device_, timeout_);
  aborted_ = true;
}

void NcclComm::fail(const std::string& what, const std::string& why) {
  abort();
  throw Error(Errc::comm_error, where_ + ": " + what + ": " + why + "; the NCCL communicator is aborted");
}

template <class Done>
void NcclComm::poll(Done&& done, const std::string& what, const std::string& peers, const std::string& stalled) {
  check_usable(what);
  const Deadline deadline(timeout_);
  // The host operations' exchanges of a few words take tens of microseconds: asked again at once (giving
  // the CPU to other threads) for the first 200 us, since a sleep also lasts the kernel's timer slack (50 us
  // by default) beyond what it asks, then in sleeps doubling up to 1 ms.
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t asked = ncclCommGetAsyncError(comm_, &state);
    if (asked != ncclSuccess) state = asked;
    if (state != ncclSuccess && state != ncclInProgress) {
      const char* last = ncclGetLastError(comm_);
      fail(what, std::string("NCCL reported ") + ncclGetErrorString(state) + " (" + (last ? last : "") +
                     "): " + peers + ", or its link, failed");
    }
    if (done(state)) return;
    if (deadline.expired()) fail(what, "not complete within " + deadline.describe() + ": " + stalled);
    if (std::chrono::steady_clock::now() < spin_until) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void NcclComm::check_call(ncclResult_t result, const std::string& what, const std::string& peers) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  if (result == ncclInvalidArgument || result == ncclInvalidUsage) {
    throw_nccl(static_cast<int>(result), "the NCCL call", __FILE__, __LINE__, where_ + ": " + what);
  }
  const char* last = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
  fail(what, std::string("NCCL returned ") + ncclGetErrorString(result) + " (" + (last ? last : "") +
                 "): " + peers + ", or its link, failed");
}

void NcclComm::settle(ncclResult_t launched, const std::string& what, const std::string& peers) {
  check_call(launched, what, peers);
  DeviceGuard guard(device_);
  poll([](ncclResult_t state) { return state == ncclSuccess; }, what, peers, peers + " has not called it");
}

void NcclComm::wait(const Event& event, const std::string& what, const std::string& peers) {
  wait(event, what, peers, peers + " has not taken part (gone, or not calling it)");
}

void NcclComm::wait(const Event& event, const std::string& what, const std::string& peers,
                    const std::string& stalled) {
  poll(
      [&](ncclResult_t) {
        const cudaError_t status = event.query();
        if (status == cudaErrorNotReady) return false;
        GPUXFER_CUDA_TRY_CTX(status, where_ + ": " + what);
        return true;
      },
      what, peers, stalled);
}

}  // namespace gpuxfer::detail
