#include "memory/host_copy_workers.hpp"

#include <algorithm>
#include <latch>
#include <string>

#include <pthread.h>
#include <sched.h>

#include "memory/streaming_copy.hpp"
#include "runtime/log.hpp"

namespace gpuxfer::detail {
namespace {
// Below this a split costs more in hand-offs than it saves; small enough that an 8 MiB chunk keeps
// 16 threads busy (host memcpy bandwidth keeps growing up to about 16 threads).
constexpr std::size_t min_piece = std::size_t{256} << 10;
}  // namespace

HostCopyWorkers::HostCopyWorkers(unsigned threads, const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (const int cpu : cpus) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
  }
  // Workers start on first use would complicate copy(); they are cheap while idle.
  for (unsigned i = 0; i < threads; ++i) {
    workers_.emplace_back([this] { run(); });
    if (!cpus.empty() && pthread_setaffinity_np(workers_.back().native_handle(), sizeof set, &set) != 0) {
      GPUXFER_LOG(warn, "a host copy thread could not be placed on its node's " + std::to_string(cpus.size()) +
                            " CPUs: it runs anywhere");
    }
  }
}

HostCopyWorkers::~HostCopyWorkers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
}

void HostCopyWorkers::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop();
    }
    task();
  }
}

void HostCopyWorkers::post(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push(std::move(task));
  }
  wake_.notify_one();
}

CopyTeam::CopyTeam(HostCopyWorkers& workers, std::size_t members, std::function<void()> member)
    : member_(std::move(member)), left_(static_cast<std::ptrdiff_t>(members)) {
  for (std::size_t i = 0; i < members; ++i) {
    try {
      workers.post([this] {
        member_();
        left_.count_down();
      });
    } catch (...) {  // out of memory queuing: the members queued run, the others never will
      left_.count_down(static_cast<std::ptrdiff_t>(members - i));
      left_.wait();
      throw;
    }
  }
}

void CopyTeam::join() noexcept {
  if (joined_) return;
  left_.wait();
  joined_ = true;
}

void HostCopyWorkers::copy(void* dst, const void* src, std::size_t bytes) {
  const std::size_t max_pieces = workers_.size() + 1;
  const std::size_t pieces = std::clamp<std::size_t>(bytes / min_piece, 1, max_pieces);
  if (pieces == 1) {
    copy_streaming(dst, src, bytes);
    return;
  }
  // Pieces aligned to 4 KiB so no two threads share a page.
  const std::size_t step = ((bytes + pieces - 1) / pieces + 4095) / 4096 * 4096;
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  std::latch done(static_cast<std::ptrdiff_t>(pieces - 1));
  {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 1; i < pieces; ++i) {
      const std::size_t begin = std::min(bytes, i * step);
      const std::size_t end = i + 1 == pieces ? bytes : std::min(bytes, begin + step);
      tasks_.push([=, &done] {
        if (end > begin) copy_streaming(d + begin, s + begin, end - begin);
        done.count_down();
      });
    }
  }
  wake_.notify_all();
  copy_streaming(d, s, std::min(bytes, step));
  done.wait();
}

}  // namespace gpuxfer::detail
