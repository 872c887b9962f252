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
      GPUXFER_LOG(warn, "a host copy thread could not be placed on its node's " +
                            std::to_string(cpus.size()) + " CPUs: it runs anywhere");
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
      tasks_.pop_front();
    }
    task();
  }
}

template <class Make>
void HostCopyWorkers::queue_all(std::size_t count, const Make& make) {
  // A task queued and then left behind by a throw would run after its caller has gone on.
  const std::size_t before = tasks_.size();
  try {
    for (std::size_t i = 0; i < count; ++i) tasks_.push_back(make(i));
  } catch (...) {
    while (tasks_.size() > before) tasks_.pop_back();
    throw;
  }
}

void HostCopyWorkers::post(std::size_t copies, const std::function<void()>& task) {
  {
    std::lock_guard lock(mutex_);
    queue_all(copies, [&](std::size_t) { return task; });
  }
  if (copies == 1) {
    wake_.notify_one();
  } else {
    wake_.notify_all();
  }
}

// All members are queued or none: members that were queued and then waited for would wait for this
// thread, which is still in the constructor (a pipeline's members wait for the chunks its caller queues).
CopyTeam::CopyTeam(HostCopyWorkers& workers, std::size_t members, std::function<void()> member)
    : member_(std::move(member)), left_(static_cast<std::ptrdiff_t>(members)) {
  workers.post(members, [this] {
    member_();
    left_.count_down();
  });
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
    queue_all(pieces - 1, [&](std::size_t k) {
      const std::size_t begin = std::min(bytes, (k + 1) * step);
      const std::size_t end = k + 2 == pieces ? bytes : std::min(bytes, begin + step);
      return std::function<void()>([=, &done] {
        if (end > begin) copy_streaming(d + begin, s + begin, end - begin);
        done.count_down();
      });
    });
  }
  wake_.notify_all();
  copy_streaming(d, s, std::min(bytes, step));
  done.wait();
}

}  // namespace gpuxfer::detail
