// How gpuxfer's operations order with the caller's streams and with each other, on the GPU: every
// registered buffer belongs to the stream that registered it, and gpuxfer tracks, per buffer, its own
// last write and the reads since. See docs/ARCHITECTURE.md, "Ordering".
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <vector>

#include <cuda_runtime_api.h>

#include "engine/device_range.hpp"
#include "node/manager_state.hpp"
#include "runtime/event.hpp"

namespace gpuxfer::detail {

/// What an operation does with a range.
enum class Access { read, write };

/// Whether the operation queues its work on a range as one copy that may run on the buffer's own stream
/// instead of a gpuxfer stream (see DeviceRange::own_stream).
enum class OwnStream { no, allowed };

/// The caller's side of an operation: nothing (a form ordered by the registrations alone), one stream for
/// every device, or one stream per device.
struct CallerStreams {
  CallerStreams() = default;
  CallerStreams(std::nullopt_t) {}                                    // NOLINT: no caller, implicitly
  CallerStreams(cudaStream_t stream) : one(stream) {}                 // NOLINT: one stream, implicitly
  CallerStreams(std::optional<cudaStream_t> stream) : one(stream) {}  // NOLINT
  explicit CallerStreams(std::span<const cudaStream_t> streams) : per_device(streams), per_device_given(true) {}
  std::optional<cudaStream_t> one;
  std::span<const cudaStream_t> per_device;
  bool per_device_given = false;  // an empty span is a wrong count, not "no caller"
  [[nodiscard]] bool any() const noexcept { return one.has_value() || per_device_given; }
};

/// gpuxfer's work in flight on one registered buffer's memory, shared by its registrations (the same
/// memory registered again keeps it: BufferRegistry) and the operations using it. The stream the buffer
/// belongs to is the registration's (DeviceRange::producer), so an operation whose snapshot came before a
/// registration of the same memory with another stream still records its work where later ones look.
class BufferOrder {
 public:
  /// True when none of gpuxfer's work on the buffer is in flight, seen now without waiting: a buffer an
  /// operation is ordering or queuing work on counts as busy.
  [[nodiscard]] bool idle();

 private:
  friend class OperationOrder;
  // Held by each operation that queues work on the buffer, from ordering to done(): shared by those that
  // only read it (reads exclude no reads), alone by one that writes it.
  std::shared_mutex mutex_;
  std::mutex reads_mutex_;           // reads_ between the operations that share mutex_
  std::vector<SharedEvent> writes_;  // gpuxfer's last write: done when every event has completed
  std::vector<SharedEvent> reads_;   // gpuxfer's reads since that write
};

/// The ordering of one operation. Built before anything is queued, it
///  - forks from the caller's stream (stream-ordered forms): every range waits for the work queued on it;
///  - waits for the work queued now on each registered buffer's own stream, and for gpuxfer's earlier
///    writes of the buffer (and, to write it, for gpuxfer's reads in flight);
///  - after the work is queued (done()), makes each buffer's stream wait for what the operation did to it,
///    records it as the buffer's last write or a read in flight, and join() makes the caller's stream
///    wait for all of it.
/// While the caller's stream captures a graph, only the fork and the join are made (the graph's launches
/// order with everything else) and nothing is queried or recorded in the registrations; the work goes on
/// streams the capture takes for itself (DeviceRange::streams), never on those other operations share.
class OperationOrder {
 public:
  /// @p caller: nothing for a form ordered by the registrations alone; one stream (0 and cudaStreamLegacy
  /// mean the legacy default stream of each device touched); or one per device, each range forking from
  /// and joining the stream of its device. @p what names the operation in messages.
  /// @throws Error(Errc::invalid_argument) for per-device streams that are not one per device, each of its
  /// device, or of which some capture a CUDA graph and not every one into the same graph
  OperationOrder(ManagerState& m, const CallerStreams& caller, const char* what);
  ~OperationOrder();
  OperationOrder(const OperationOrder&) = delete;
  OperationOrder& operator=(const OperationOrder&) = delete;

  /// True when the caller's stream is capturing a CUDA graph.
  [[nodiscard]] bool capturing() const noexcept { return capturing_; }
  /// @throws Error(Errc::unsupported) when capturing, saying that @p why cannot be captured
  void refuse_capture(const char* why) const;

  /// Adds @p r (a registered buffer when r.order is set, else caller memory) to the operation. With
  /// OwnStream::allowed, begin() sets r.own_stream when the operation has no caller stream and the buffer
  /// belongs to a stream of its own device (not a default stream): the operation then queues its copy of
  /// @p r on that stream and waits for r.ready there, and neither an event on that stream nor a wait of
  /// it is needed. The blocking 4 KiB gather saves three API calls so.
  void add(DeviceRange& r, Access access, OwnStream own = OwnStream::no);
  /// Locks the registrations added and fills each range's ready events: what must finish before the
  /// operation touches it. Call once, after every add() and before queuing any work.
  void begin();
  /// The operation's work on @p r (as added) ends with @p events.
  void done(const DeviceRange& r, const std::vector<SharedEvent>& events);
  /// As done(), for every range added.
  void done_all(const std::vector<SharedEvent>& events);
  /// Makes the caller's stream wait for everything done() was told, then unlocks the registrations.
  void join();

 private:
  struct Entry {
    DeviceRange* range;
    Access access;
    OwnStream own;
  };
  void order_with(cudaStream_t stream);
  void order_with(std::span<const cudaStream_t> per_device);
  SharedEvent fork_event(std::size_t device);
  [[nodiscard]] bool has_caller() const noexcept { return caller_ || !per_device_.empty(); }
  /// The capture's streams of @p device, taken at the first range of the device (capturing only).
  DeviceStreams* capture_streams(std::size_t device);
  /// True when @p stream is the caller's stream for @p device (its fork and join cover it).
  [[nodiscard]] bool is_caller(std::size_t device, cudaStream_t stream) const noexcept;
  void unlock() noexcept;

  ManagerState& m_;
  std::optional<cudaStream_t> caller_;  // one stream for every device
  int caller_ordinal_ = -1;
  std::vector<cudaStream_t> per_device_;  // or one per device (the legacy default stream's form too)
  bool capturing_ = false;
  // The capture of the caller's stream (one entry) or of each device's (none for a device whose stream
  // does not capture).
  std::vector<std::optional<unsigned long long>> captures_;
  std::vector<std::pair<std::size_t, DeviceStreams*>> taken_;  // capture_streams() per device
  const char* what_;
  std::vector<Entry> entries_;
  std::vector<std::pair<std::size_t, SharedEvent>> forks_;     // per device (one entry for a plain stream)
  std::vector<SharedEvent> finished_;  // the events of every done(): what join() waits for
  std::vector<std::unique_lock<std::shared_mutex>> writing_;  // the registrations the operation writes
  std::vector<std::shared_lock<std::shared_mutex>> reading_;  // and those it only reads
};

}  // namespace gpuxfer::detail
