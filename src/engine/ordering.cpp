#include "engine/ordering.hpp"

#include <algorithm>
#include <array>
#include <string>

#include <gpuxfer/detail/device_guard.hpp>
#include <gpuxfer/error.hpp>

#include "runtime/capture_mode.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/stream.hpp"

namespace gpuxfer::detail {
namespace {

// Not a default stream: a copy cannot take a buffer's own stream when it is one (the legacy one orders
// with every blocking stream; the per-thread one means another stream on every thread).
bool is_plain(cudaStream_t stream) noexcept { return !is_default_stream(stream); }

// Drops the events that have completed (a failed one stays: its waiter reports the failure); one a host
// thread has seen complete costs no query.
void prune(std::vector<SharedEvent>& events) {
  // Event::query asks under the event's device (a thread with no context gets none) and in relaxed
  // capture mode.
  std::erase_if(events, [](const SharedEvent& e) { return e->completed() || e->query() == cudaSuccess; });
}

// A set of @p device's capture streams for the capture @p capture: one in no capture or already in this
// one, else a new one. Each of its streams waits for @p fork before the lock is let go, which joins it to
// the capture, so no other capture can take it meanwhile; the capture's end frees it.
DeviceStreams& take_capture_streams(ManagerState& m, std::size_t device, unsigned long long capture,
                                    const SharedEvent& fork) {
  std::lock_guard lock(m.capture_mutex);
  DeviceGuard guard(m.ordinal(device));
  const RelaxedCapture relaxed;  // a new set's streams and scratch pool are made on a capturing thread
  const auto free_for = [&](const DeviceStreams& set) {
    const std::array<cudaStream_t, 4> streams = set.copy_streams();
    return std::all_of(streams.begin(), streams.end(), [&](cudaStream_t stream) {
      const std::optional<unsigned long long> in = capture_of(stream, "asking a capture stream's capture");
      return !in || *in == capture;
    });
  };
  std::vector<std::unique_ptr<DeviceStreams>>& sets = m.capture_streams[device];
  const auto found = std::find_if(sets.begin(), sets.end(), [&](const auto& set) { return free_for(*set); });
  DeviceStreams& set =
      found != sets.end() ? **found : *sets.emplace_back(std::make_unique<DeviceStreams>(m.ordinal(device)));
  for (cudaStream_t stream : set.copy_streams()) stream_wait(stream, fork);
  return set;
}

}  // namespace

bool BufferOrder::idle() {
  const std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  prune(writes_);
  prune(reads_);
  return writes_.empty() && reads_.empty();
}

OperationOrder::OperationOrder(ManagerState& m, const CallerStreams& caller, const char* what)
    : m_(m), what_(what) {
  if (caller.per_device_given) {
    order_with(caller.per_device);
  } else if (caller.one) {
    order_with(*caller.one);
  }
}

void OperationOrder::order_with(cudaStream_t stream) {
  // The legacy default stream is one per device and cannot capture.
  if (stream == nullptr || stream == cudaStreamLegacy) {
    per_device_.assign(m_.size(), cudaStreamLegacy);
    return;
  }
  caller_ = stream;
  const CallerStream caller = caller_stream(stream, what_, "the caller's stream");
  capturing_ = caller.capturing;
  caller_ordinal_ = caller.ordinal;
  if (capturing_) captures_.assign(1, caller.capture_id);
}

void OperationOrder::order_with(std::span<const cudaStream_t> per_device) {
  if (per_device.size() != m_.size()) {
    throw Error(Errc::invalid_argument, std::string(what_) + ": " + std::to_string(per_device.size()) +
                                            " streams for " + std::to_string(m_.size()) +
                                            " devices (one per device)");
  }
  per_device_.assign(per_device.begin(), per_device.end());
  captures_.assign(per_device_.size(), std::nullopt);
  for (std::size_t i = 0; i < per_device_.size(); ++i) {
    cudaStream_t& stream = per_device_[i];
    if (stream == nullptr) stream = cudaStreamLegacy;
    if (stream == cudaStreamLegacy) continue;
    // Asked under a context of the caller's (caller_stream): a thread that has none is left with none.
    const CallerStream given = caller_stream(stream, what_, "the stream given for " + device_name(m_, i));
    if (given.capturing) {
      captures_[i] = given.capture_id;
      capturing_ = true;
      continue;
    }
    if (given.ordinal != m_.ordinal(i)) {
      throw Error(Errc::invalid_argument, std::string(what_) + ": the stream given for " +
                                              device_name(m_, i) + " belongs to ordinal " +
                                              std::to_string(given.ordinal));
    }
  }
  if (!capturing_) return;
  // A stream that does not capture would run its device's part at once, unordered with the capture, and
  // the join would mix the capture's events with others: refused before anything is queued.
  const auto first =
      std::find_if(captures_.begin(), captures_.end(), [](const auto& c) { return c.has_value(); });
  for (std::size_t i = 0; i < captures_.size(); ++i) {
    if (captures_[i] == *first) continue;
    throw Error(Errc::invalid_argument,
                std::string(what_) +
                    ": of the streams given, one per device, either none captures a CUDA graph or "
                    "every one captures into one graph; the stream given for " +
                    device_name(m_, i) +
                    (captures_[i] ? " captures into another graph"
                                  : " captures nothing (the legacy default "
                                    "stream never does)"));
  }
}

OperationOrder::~OperationOrder() { unlock(); }

void OperationOrder::refuse_capture(const char* why) const {
  if (!capturing_) return;
  throw Error(Errc::unsupported, std::string(what_) + " cannot be captured in a CUDA graph: " + why);
}

void OperationOrder::add(DeviceRange& r, Access access, OwnStream own) { entries_.push_back({&r, access, own}); }

SharedEvent OperationOrder::fork_event(std::size_t device) {
  if (caller_) {
    if (forks_.empty()) {
      DeviceGuard guard(caller_ordinal_);
      forks_.emplace_back(device, record_event(caller_ordinal_, *caller_));
    }
    return forks_.front().second;
  }
  for (const auto& [d, e] : forks_) {
    if (d == device) return e;
  }
  DeviceGuard guard(m_.ordinal(device));
  forks_.emplace_back(device, record_event(m_.ordinal(device), per_device_[device]));
  return forks_.back().second;
}

DeviceStreams* OperationOrder::capture_streams(std::size_t device) {
  for (const auto& [d, set] : taken_) {
    if (d == device) return set;
  }
  const std::optional<unsigned long long> capture = caller_ ? captures_.front() : captures_.at(device);
  if (!capture) return nullptr;  // this device's stream captures nothing: the device's own streams
  DeviceStreams& set = take_capture_streams(m_, device, *capture, fork_event(device));
  taken_.emplace_back(device, &set);
  return &set;
}

bool OperationOrder::is_caller(std::size_t device, cudaStream_t stream) const noexcept {
  // The per-thread handle names one stream per device: the caller's is that of caller_ordinal_ alone.
  if (caller_) return *caller_ == stream && (is_plain(stream) || caller_ordinal_ == m_.ordinal(device));
  return !per_device_.empty() && per_device_[device] == stream;
}

void OperationOrder::begin() {
  std::vector<std::pair<BufferOrder*, bool>> orders;  // and whether the operation writes it
  for (const Entry& e : entries_) {
    if (e.range->order) orders.emplace_back(e.range->order.get(), e.access == Access::write);
  }
  // One lock order for every operation: by address, each buffer once (alone where any entry writes it).
  std::sort(orders.begin(), orders.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  });
  orders.erase(std::unique(orders.begin(), orders.end(),
                           [](const auto& a, const auto& b) { return a.first == b.first; }),
               orders.end());
  for (const auto& [o, writes] : orders) {
    if (writes) {
      writing_.emplace_back(o->mutex_);
    } else {
      reading_.emplace_back(o->mutex_);
    }
  }

  for (const Entry& e : entries_) {
    DeviceRange& r = *e.range;
    r.ready.clear();
    r.own_stream = nullptr;
    r.streams = capturing_ ? capture_streams(r.device) : nullptr;
    if (has_caller()) r.ready.push_back(fork_event(r.device));
    if (!r.order || capturing_) continue;
    BufferOrder& o = *r.order;
    const int ordinal = m_.ordinal(r.device);  // the producer's too (set_device_buffer checks it)
    if (e.own == OwnStream::allowed && !has_caller() && is_plain(r.producer)) r.own_stream = r.producer;
    // The work queued on the buffer's own stream until now (the caller's stream covers it when it is that
    // one, and so does the copy's running on it).
    if (!is_caller(r.device, r.producer) && r.own_stream == nullptr) {
      DeviceGuard guard(ordinal);
      r.ready.push_back(record_event(ordinal, r.producer));
    }
    r.ready.insert(r.ready.end(), o.writes_.begin(), o.writes_.end());
    if (e.access == Access::write) r.ready.insert(r.ready.end(), o.reads_.begin(), o.reads_.end());
  }
}

void OperationOrder::done(const DeviceRange& r, const std::vector<SharedEvent>& events) {
  finished_.insert(finished_.end(), events.begin(), events.end());
  if (!r.order || capturing_ || events.empty()) return;
  const auto entry =
      std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.range == &r; });
  const Access access = entry != entries_.end() ? entry->access : Access::write;
  BufferOrder& o = *r.order;
  if (access == Access::write) {
    o.writes_ = events;
    o.reads_.clear();
  } else {
    const std::lock_guard lock(o.reads_mutex_);  // other readers may record theirs meanwhile
    prune(o.reads_);
    o.reads_.insert(o.reads_.end(), events.begin(), events.end());
  }
  // The buffer's stream waits for what gpuxfer did to it before its later work (it is in that stream's
  // order already when the copy ran there).
  if (!is_caller(r.device, r.producer) && r.own_stream != r.producer) {
    DeviceGuard guard(m_.ordinal(r.device));
    stream_wait(r.producer, events);
  }
}

void OperationOrder::done_all(const std::vector<SharedEvent>& events) {
  for (const Entry& e : entries_) done(*e.range, events);
}

void OperationOrder::join() {
  // Every stream a capture took rejoins it, those the operation left unused too (a fork not joined fails
  // the capture's end).
  for (const auto& [device, set] : taken_) {
    DeviceGuard guard(set->ordinal);
    for (cudaStream_t stream : set->copy_streams()) finished_.push_back(record_event(set->ordinal, stream));
  }
  taken_.clear();
  if (caller_) {
    DeviceGuard guard(caller_ordinal_);
    stream_wait(*caller_, finished_);
  } else {
    // Every stream of the list, those of devices the operation skipped too (a gather's destination, a
    // device with nothing registered): each one's later work comes after the whole operation.
    for (std::size_t d = 0; d < per_device_.size(); ++d) {
      DeviceGuard guard(m_.ordinal(d));
      stream_wait(per_device_[d], finished_);
    }
  }
  unlock();
}

void OperationOrder::unlock() noexcept {
  writing_.clear();
  reading_.clear();
}

}  // namespace gpuxfer::detail
