#include "host_threads.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <gpuxfer/testing/pattern.hpp>

#include "memory/streaming_copy.hpp"

namespace gpuxfer::bench {
namespace {

// Below this, splitting costs more than it saves: the caller's thread does the work alone.
constexpr std::size_t serial_below = std::size_t{1} << 20;

std::size_t parts_for(const HostThreads& threads, std::size_t bytes) {
  if (bytes < serial_below) return 1;
  const std::size_t cores = std::max<std::size_t>(1, std::thread::hardware_concurrency());
  return std::min(threads.size(), cores);
}

#if defined(__x86_64__)
bool has_clflushopt() noexcept {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && (b & bit_CLFLUSHOPT) != 0;
}

__attribute__((target("clflushopt"))) void flush_opt(const std::byte* p, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; i += 64) _mm_clflushopt(const_cast<std::byte*>(p + i));
}

void flush_plain(const std::byte* p, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; i += 64) _mm_clflush(p + i);
}
#endif

// Writes @p out's cache lines back to memory and drops them from every cache. A DMA into or out of lines
// the CPUs hold dirty waits for their write-back (small_gather measured it: see its prepare). On the H100
// runner the raw 64 MiB D2H ceiling read 18.6 GB/s after the bench's poison while a probe's copy of a
// buffer left untouched read 55: the bench's preparation must not slow some copies it times (the raw
// ceilings' buffers) and not others (blocks the pool handed out).
void evict(std::span<const std::byte> out) noexcept {
#if defined(__x86_64__)
  static const bool opt = has_clflushopt();
  if (opt) {
    flush_opt(out.data(), out.size());
  } else {
    flush_plain(out.data(), out.size());
  }
  _mm_sfence();
#else
  (void)out;
#endif
}

}  // namespace

HostThreads::HostThreads(std::size_t count) {
  const std::size_t n = std::max<std::size_t>(1, count);
  workers_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) workers_.emplace_back([this, i] { work(i); });
}

HostThreads::~HostThreads() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void HostThreads::run(std::size_t parts, const std::function<void(std::size_t)>& fn) {
  parts = std::clamp<std::size_t>(parts, 1, workers_.size());
  std::unique_lock lock(mutex_);
  job_ = &fn;
  parts_ = parts;
  pending_ = parts;
  error_ = nullptr;
  ++generation_;
  wake_.notify_all();
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void HostThreads::work(std::size_t index) {
  std::uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= parts_) continue;
    const auto* job = job_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*job)(index);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !error_) error_ = error;
    if (--pending_ == 0) done_.notify_one();
  }
}

Range split(std::size_t bytes, std::size_t parts, std::size_t part) noexcept {
  const std::size_t per = (bytes / parts + 63) / 64 * 64;
  const std::size_t begin = std::min(bytes, part * per);
  const std::size_t end = part + 1 == parts ? bytes : std::min(bytes, begin + per);
  return {begin, end};
}

void parallel_copy(HostThreads& threads, std::size_t parts, bool streaming, std::byte* dst, const std::byte* src,
                   std::size_t bytes) {
  parts = std::min(parts, threads.size());
  threads.run(parts, [&](std::size_t part) {
    const Range r = split(bytes, parts, part);
    if (streaming) {
      detail::copy_streaming(dst + r.begin, src + r.begin, r.end - r.begin);
    } else {
      std::memcpy(dst + r.begin, src + r.begin, r.end - r.begin);
    }
  });
}

void parallel_fill(HostThreads& threads, std::span<std::byte> out, std::uint64_t seed, std::uint64_t offset) {
  const std::size_t parts = parts_for(threads, out.size());
  if (parts == 1) {
    pattern::fill_host(out, seed, offset);
    evict(out);
    return;
  }
  threads.run(parts, [&](std::size_t part) {
    const Range r = split(out.size(), parts, part);
    pattern::fill_host(out.subspan(r.begin, r.end - r.begin), seed, offset + r.begin);
    evict(out.subspan(r.begin, r.end - r.begin));
  });
}

std::size_t parallel_mismatches(HostThreads& threads, std::span<const std::byte> data, std::uint64_t seed,
                                std::uint64_t offset) {
  const std::size_t parts = parts_for(threads, data.size());
  if (parts == 1) return pattern::count_mismatches_host(data, seed, offset);
  std::atomic<std::size_t> wrong{0};
  threads.run(parts, [&](std::size_t part) {
    const Range r = split(data.size(), parts, part);
    wrong += pattern::count_mismatches_host(data.subspan(r.begin, r.end - r.begin), seed, offset + r.begin);
  });
  return wrong.load();
}

void parallel_poison(HostThreads& threads, std::span<std::byte> out) {
  const std::size_t parts = parts_for(threads, out.size());
  if (parts == 1) {
    std::memset(out.data(), poison_byte, out.size());
    evict(out);
    return;
  }
  threads.run(parts, [&](std::size_t part) {
    const Range r = split(out.size(), parts, part);
    std::memset(out.data() + r.begin, poison_byte, r.end - r.begin);
    evict(out.subspan(r.begin, r.end - r.begin));
  });
}

}  // namespace gpuxfer::bench
