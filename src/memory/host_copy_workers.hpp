// Threads that copy between pageable and pinned host memory in parallel: one thread copies about
// 8 GB/s, the host's memory system several times that (GPU.md's measurements).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

namespace gpuxfer::detail {

/// A fixed set of memcpy workers shared by every pageable path of one manager.
class HostCopyWorkers {
 public:
  /// @p threads workers, on @p cpus (a NUMA node's) when it is not empty.
  explicit HostCopyWorkers(unsigned threads, const std::vector<int>& cpus = {});
  ~HostCopyWorkers();
  HostCopyWorkers(const HostCopyWorkers&) = delete;
  HostCopyWorkers& operator=(const HostCopyWorkers&) = delete;

  /// memcpy(dst, src, bytes), split over the workers and the calling thread, each piece with
  /// copy_streaming (non-temporal stores where the CPU has them); returns when done.
  void copy(void* dst, const void* src, std::size_t bytes);

  /// The number of worker threads.
  [[nodiscard]] std::size_t size() const noexcept { return workers_.size(); }

  /// Queues @p copies runs of @p task on the workers, all of them or, when memory runs out, none (then
  /// throws std::bad_alloc). For CopyTeam.
  void post(std::size_t copies, const std::function<void()>& task);

 private:
  void run();
  // Queues make(i) for i < count, or nothing if one throws; with mutex_ held, so no worker has taken any.
  template <class Make>
  void queue_all(std::size_t count, const Make& make);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::jthread> workers_;
};

/// @p members runs of one function on the workers at once, while the calling thread does something else
/// (queues the GPU's part of a pipeline). The destructor waits for every member to return: declare the team
/// after what its function uses. The function must return on its own, and must not throw.
class CopyTeam {
 public:
  CopyTeam(HostCopyWorkers& workers, std::size_t members, std::function<void()> member);
  ~CopyTeam() { join(); }
  CopyTeam(const CopyTeam&) = delete;
  CopyTeam& operator=(const CopyTeam&) = delete;

  /// Waits for every member to return.
  void join() noexcept;

 private:
  std::function<void()> member_;
  std::latch left_;
  bool joined_ = false;
};

}  // namespace gpuxfer::detail
