// The C++ half of gpuxfer.Transfer: the engine, and the Python objects whose memory it uses.
//
// Lifetimes: the object registered on each device, and the stream object it was registered with, are
// held until the registration is replaced or cleared; a pair replaced while an operation is in flight
// (another thread's gather with the GIL released, an async handle not yet collected) is retired, not
// dropped, until no operation is in flight. A stream-ordered call (stream=) returns before its work is
// done: what it uses (its host arrays and caller tensors, and every registered pair) is kept behind a
// StreamMark until its stream gets past the call, checked at each later operation and awaited when the
// Transfer dies. Every member here is touched with the GIL held only, but `registering`.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/inter_gpu_transfer.hpp>

#include "stream_order.hpp"

namespace gpuxfer::python {

namespace nb = nanobind;

/// What a registration keeps alive: the tensor whose memory it names, and the caller's stream object
/// (a torch.cuda.Stream, a cupy.cuda.Stream, a __cuda_stream__ object; None for an int handle), so that a
/// stream dropped by the caller is not destroyed under a registration that names it.
struct Held {
  nb::object tensor;
  nb::object stream;
};

struct Transfer {
  explicit Transfer(std::shared_ptr<MultiGpuManager> m)
      : manager(m), engine(std::make_unique<InterGpuTransfer>(m)), registered(m->device_count()) {
    for (const DeviceInfo& d : m->devices()) ordinals.push_back(d.ordinal);
  }
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;
  /// As close() without its refusal (a collection cannot be refused): the streams of what is kept are
  /// waited for, then the engine and this hold on the manager end with the GIL released (their teardown
  /// waits for the GPU); the Python objects go after, with it held.
  ~Transfer() {
    kept.release();
    nb::gil_scoped_release gil;
    engine.reset();
    manager.reset();
  }

  /// The engine. @throws Error(Errc::invalid_argument) once close() has ended it
  InterGpuTransfer& live() const {
    if (!engine)
      throw Error(Errc::invalid_argument, "gpuxfer.Transfer: the transfer is closed (Transfer.close)");
    return *engine;
  }

  std::shared_ptr<MultiGpuManager> manager;  // still answered once closed
  std::unique_ptr<InterGpuTransfer> engine;  // null once closed
  std::vector<Held> registered;  // per device: what its registration holds, or empty
  std::vector<Held> retired;     // replaced while operations were in flight
  /// Held from a registration's change in C++ (made with the GIL released) to the change of what Python
  /// holds for it, so that two threads' changes reach both in one order. Taken with the GIL released
  /// only, so a thread waiting for it never holds the GIL another one needs to let it go.
  std::mutex registering;
  std::size_t in_flight = 0;
  std::vector<int> ordinals;  // CUDA ordinal of each device, for marks on the legacy default stream
  KeptObjects kept;           // what stream-ordered calls and the operations of dropped handles use, until
                              // their streams get past them (its destructor waits for those streams, so
                              // that nothing is freed under the GPU)

  void begin() noexcept { ++in_flight; }
  void end() {
    if (--in_flight != 0) return;
    // Taken out before they are dropped: a finalizer may call back into this transfer (hold, end).
    const std::vector<Held> dropped = std::exchange(retired, {});
  }
  /// Returns the pair it replaced, unless an operation in flight may still use it (then retired keeps
  /// it): the caller drops it only once `registering` is let go of, since a finalizer it runs may
  /// register on this Transfer.
  [[nodiscard]] Held hold(std::size_t device, Held held) {
    Held replaced = std::exchange(registered[device], std::move(held));
    if (replaced.tensor.is_valid() && in_flight > 0) {
      retired.push_back(std::move(replaced));
      return {};
    }
    return replaced;
  }

  /// Drops what stream-ordered calls kept and their streams have got past. Never blocks.
  void reap() noexcept { kept.reap(); }
  /// After a stream-ordered call on @p stream: keeps @p used (the call's own Python objects) and every
  /// registered or retired pair until @p stream gets past the call. Call it while the call is still
  /// counted in flight (an InFlight around both): a pair replaced or cleared by another thread during the
  /// call is in retired only until the last operation in flight ends.
  /// @throws Error(Errc::cuda_error) when CUDA refuses the mark's events, once the call's work on
  ///         @p stream is done (KeptObjects::keep waits for it, so nothing queued is left unkept)
  void keep_until(cudaStream_t stream, nb::object used) {
    kept.keep(stream, ordinals, pairs_and(std::move(used)));
  }
  /// When Python drops the handle of an operation before it is done: keeps every registered or retired
  /// pair until it is (a copy may still write a registered tensor that a later clear or close lets go
  /// of). @throws Error(Errc::cuda_error) when CUDA refuses (KeptObjects::keep_after)
  void keep_until_done(const TransferHandle& handle) {
    if (!ordinals.empty()) kept.keep_after(handle, ordinals.front(), pairs_and(nb::none()));
  }

  /// @p used, then every registered or retired pair's objects.
  nb::list pairs_and(nb::object used) const {
    nb::list objects;
    objects.append(std::move(used));
    for (const std::vector<Held>* pairs : {&registered, &retired}) {
      for (const Held& h : *pairs) {
        if (h.tensor.is_valid()) objects.append(h.tensor);
        if (h.stream.is_valid()) objects.append(h.stream);
      }
    }
    return objects;
  }
};

/// Counts an operation in flight for its scope; construct and destroy it with the GIL held.
class InFlight {
 public:
  explicit InFlight(Transfer& t) noexcept : t_(t) { t_.begin(); }
  ~InFlight() { t_.end(); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  Transfer& t_;
};

/// The Python handles of asynchronous operations: the C++ handle, and the transfer kept alive and counted
/// in flight until the result is collected or the handle dies.
template <typename Handle>
struct PyHandle {
  PyHandle(Handle h, Transfer& t, nb::object owner)
      : handle(std::move(h)), transfer(&t), owner(std::move(owner)) {
    transfer->begin();
  }
  /// Dropped before its result was collected and before its operation is done: the transfer keeps what
  /// the operation may use until it is (behind a stream that waits for it); the C++ handle goes, its
  /// pinned memory back to the pool once the GPU is done with it, as a dropped C++ handle's does.
  ~PyHandle() {
    if (transfer != nullptr && !operation_done(handle)) {
      try {
        transfer->keep_until_done(handle);
      } catch (...) {  // could not keep: wait here instead
        nb::gil_scoped_release gil;
        try {
          handle.wait();
        } catch (...) {  // failed: nothing more to wait for
        }
      }
    }
    finish();
  }
  PyHandle(const PyHandle&) = delete;
  PyHandle& operator=(const PyHandle&) = delete;

  void finish() {
    if (transfer == nullptr) return;
    transfer->end();
    transfer = nullptr;
  }

  Handle handle;
  Transfer* transfer;
  nb::object owner;  // the Python Transfer
};

}  // namespace gpuxfer::python
