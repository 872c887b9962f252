// Threads that copy between pageable and pinned host memory in parallel: one thread copies about
// 8 GB/s, the host's memory system several times that (GPU.md's measurements).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace gpuxfer::detail {

/// A fixed set of memcpy workers shared by every pageable path of one manager.
class HostCopyWorkers {
 public:
  /// @p threads workers in all, the calling thread counted as one of them; the others run on @p cpus
  /// (a NUMA node's) when it is not empty.
  explicit HostCopyWorkers(unsigned threads, const std::vector<int>& cpus = {});
  ~HostCopyWorkers();
  HostCopyWorkers(const HostCopyWorkers&) = delete;
  HostCopyWorkers& operator=(const HostCopyWorkers&) = delete;

  /// memcpy(dst, src, bytes), split over the workers and the calling thread, each piece with
  /// copy_streaming (non-temporal stores where the CPU has them); returns when done.
  void copy(void* dst, const void* src, std::size_t bytes);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::queue<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::jthread> workers_;
};

}  // namespace gpuxfer::detail
