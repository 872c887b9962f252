// _Transfer: every InterGpuTransfer operation with the GIL released, each with its stream-ordered form
// behind the keyword stream= (None, the default, is the blocking or handle form, never a default stream).
// Device memory arrives as (pointer, bytes) from gpuxfer/_arrays.py, which reads DLPack and
// __cuda_array_interface__; host memory as any array host_view accepts. gpuxfer.Transfer
// (python/gpuxfer/_transfer.py) is the public face.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "docstrings.hpp"
#include "host_memory.hpp"
#include "manager.hpp"
#include "pinned_block.hpp"
#include "stream_order.hpp"
#include "transfer.hpp"

namespace gpuxfer::python {
namespace {

using Slice = std::tuple<std::size_t, std::uintptr_t, std::size_t>;  // device, pointer, bytes

void* pointer(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

nb::list arrays(std::vector<HostBuffer>&& buffers) {
  nb::list out;
  for (HostBuffer& b : buffers) out.append(host_array(std::move(b)));
  return out;
}

// Runs @p op with the GIL released, counted in flight so that no registered tensor dies meanwhile; first
// drops what earlier stream-ordered calls kept and their streams are past, unless @p reap is false.
template <typename Op>
auto released(Transfer& t, Op&& op, bool reap = true) {
  if (reap) t.reap();
  InFlight counted(t);
  nb::gil_scoped_release gil;
  return op();
}

// Runs the stream-ordered @p op as released does, then keeps @p used (what the call reads or writes
// beyond the registrations) until @p stream gets past it: the call returns before its work is done.
// Counted in flight through the keep, not only through the call: a pair another thread replaced or
// cleared while the GIL was released sits in retired, which the last end() empties, and the keep must
// take it from there first (the queued work may still use it).
// Reaping queries events, which would invalidate a capture in progress (torch.cuda.graph's global mode):
// not while @p stream captures.
template <typename Op>
auto ordered(Transfer& t, cudaStream_t stream, nb::object used, Op&& op) {
  const bool reap = !capturing(stream);
  InFlight counted(t);
  return call_then([&] { return released(t, op, reap); }, [&] { t.keep_until(stream, std::move(used)); });
}

// What a stream-ordered call keeps of its host array @p obj seen as @p view: the object and its export,
// so that a resizable one (bytearray) cannot move its bytes before the stream gets past the call.
nb::object kept_host(nb::handle obj, const HostView& view) { return nb::make_tuple(obj, view.exported()); }

// @p value as an index of the transfer's devices (a closed transfer says so first).
std::size_t device_of(const Transfer& t, std::int64_t value, const char* call, const char* name) {
  (void)t.live();
  return device_index(value, t.registered.size(), call, name);
}

template <typename Handle>
nb::object handle_of(nb::handle self, Transfer& t, Handle&& h) {
  return nb::cast(new PyHandle<Handle>(std::move(h), t, nb::borrow(self)), nb::rv_policy::take_ownership);
}

void set_device_buffer(Transfer& t, std::int64_t device_arg, std::uintptr_t ptr, std::size_t bytes,
                       std::uintptr_t stream, nb::object tensor, nb::object stream_owner) {
  const std::size_t device = device_of(t, device_arg, "set_device_buffer", "device");
  std::unique_lock order(t.registering, std::defer_lock);  // until the hold: see Transfer::registering
  released(t, [&] {
    order.lock();
    t.live().set_device_buffer(device, pointer(ptr), bytes, reinterpret_cast<cudaStream_t>(stream));
  });
  const Held replaced = t.hold(device, {std::move(tensor), std::move(stream_owner)});
  order.unlock();  // before replaced goes (see Transfer::hold)
}

void clear_device_buffer(Transfer& t, std::int64_t device_arg) {
  const std::size_t device = device_of(t, device_arg, "clear_device_buffer", "device");
  std::unique_lock order(t.registering, std::defer_lock);
  released(t, [&] {
    order.lock();
    t.live().clear_device_buffer(device);
  });
  const Held replaced = t.hold(device, {});
  order.unlock();  // before replaced goes (see Transfer::hold)
}

nb::object gather(nb::handle self, std::int64_t dst_arg, nb::handle stream) {
  Transfer& t = nb::cast<Transfer&>(self);
  const std::optional<cudaStream_t> s = stream_arg(stream);
  const std::size_t dst = device_of(t, dst_arg, "gather", "dst_device");
  InFlight counted(t);  // until the handle counts itself: nothing registered meanwhile may die
  GatherHandle h = s ? ordered(t, *s, nb::none(), [&] { return t.live().gather_async(dst, *s); })
                     : released(t, [&] { return t.live().gather(dst); });
  return handle_of(self, t, std::move(h));
}

nb::object gather_all(nb::handle self, nb::handle stream) {
  Transfer& t = nb::cast<Transfer&>(self);
  const std::optional<cudaStream_t> s = stream_arg(stream);
  if (!s) return arrays(released(t, [&] { return t.live().gather_all(); }));
  InFlight counted(t);
  GatherHandle h = ordered(t, *s, nb::none(), [&] { return t.live().gather_all_async(*s); });
  return handle_of(self, t, std::move(h));
}

// For benchmarks/python: @p calls blocking gather_all calls, each timed in C++ (steady_clock around the
// call, the results given back after the clock stops, the GIL released throughout): the C++ call in this
// very process, to set beside the same call from Python. Seconds, one per call.
std::vector<double> time_gather_all(Transfer& t, std::size_t calls) {
  std::vector<double> seconds(calls);
  released(t, [&] {
    for (double& s : seconds) {
      const auto start = std::chrono::steady_clock::now();
      const std::vector<HostBuffer> out = t.live().gather_all();
      s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  });
  return seconds;
}

void copy_buffer(Transfer& t, std::int64_t src_arg, std::int64_t dst_arg, nb::handle data, nb::handle stream) {
  const std::optional<cudaStream_t> s = stream_arg(stream);
  HostView view = host_view(data, false);
  const std::size_t src = device_of(t, src_arg, "copy_buffer", "src_device");
  const std::size_t dst = device_of(t, dst_arg, "copy_buffer", "dst_device");
  if (s) {
    ordered(t, *s, kept_host(data, view), [&] { t.live().copy_buffer_async(src, dst, view.cspan(), *s); });
  } else {
    released(t, [&] { t.live().copy_buffer(src, dst, view.cspan()); });
  }
}

void copy_device_buffer(Transfer& t, std::int64_t src_arg, std::int64_t dst_arg, CopyPath path,
                        nb::handle stream) {
  const std::optional<cudaStream_t> s = stream_arg(stream);
  const std::size_t src = device_of(t, src_arg, "copy_device_buffer", "src_device");
  const std::size_t dst = device_of(t, dst_arg, "copy_device_buffer", "dst_device");
  if (s) {
    ordered(t, *s, nb::none(), [&] { (void)t.live().copy_device_buffer_async(src, dst, *s, path); });
  } else {
    released(t, [&] { t.live().copy_device_buffer(src, dst, path); });
  }
}

nb::object copy_device_buffer_async(nb::handle self, std::int64_t src_arg, std::int64_t dst_arg, CopyPath path,
                                    nb::handle stream) {
  Transfer& t = nb::cast<Transfer&>(self);
  const std::optional<cudaStream_t> s = stream_arg(stream);
  const std::size_t src = device_of(t, src_arg, "copy_device_buffer_async", "src_device");
  const std::size_t dst = device_of(t, dst_arg, "copy_device_buffer_async", "dst_device");
  InFlight counted(t);
  TransferHandle h =
      s ? ordered(t, *s, nb::none(), [&] { return t.live().copy_device_buffer_async(src, dst, *s, path); })
        : released(t, [&] { return t.live().copy_device_buffer_async(src, dst, path); });
  return handle_of(self, t, std::move(h));
}

void broadcast(Transfer& t, nb::handle data, HostBroadcastPath path, nb::handle stream) {
  const std::optional<cudaStream_t> s = stream_arg(stream);
  HostView view = host_view(data, false);
  if (s) {
    ordered(t, *s, kept_host(data, view), [&] { t.live().broadcast_async(view.cspan(), *s, path); });
  } else {
    released(t, [&] { t.live().broadcast(view.cspan(), path); });
  }
}

void broadcast_from_device(Transfer& t, std::int64_t root_arg, DeviceBroadcastPath path, nb::handle stream) {
  const std::optional<cudaStream_t> s = stream_arg(stream);
  const std::size_t root = device_of(t, root_arg, "broadcast_from_device", "root");
  if (s) {
    ordered(t, *s, nb::none(), [&] { t.live().broadcast_from_device_async(root, *s, path); });
  } else {
    released(t, [&] { t.live().broadcast_from_device(root, path); });
  }
}

std::vector<GatherPiece> gather_into(Transfer& t, nb::handle out, std::optional<std::int64_t> skip_arg,
                                     nb::handle stream) {
  const std::optional<cudaStream_t> s = stream_arg(stream);
  HostView view = host_view(out, true);
  std::optional<std::size_t> skip;
  if (skip_arg) skip = device_of(t, *skip_arg, "gather_into", "skip_device");
  if (s)
    return ordered(t, *s, kept_host(out, view),
                   [&] { return t.live().gather_into_async(view.span(), *s, skip); });
  return released(t, [&] { return t.live().gather_into(view.span(), skip); });
}

// @p used: the slice tensors, kept with @p out by the stream-ordered form.
std::size_t gather_slices(Transfer& t, const std::vector<Slice>& slices, nb::handle out, nb::handle stream,
                          nb::object used) {
  const std::optional<cudaStream_t> s = stream_arg(stream);
  std::vector<DeviceSlice> ranges;
  ranges.reserve(slices.size());
  for (auto [device, ptr, bytes] : slices) ranges.push_back({device, pointer(ptr), bytes});
  HostView view = host_view(out, true);
  if (s) {
    return ordered(t, *s, nb::make_tuple(kept_host(out, view), used),
                   [&] { return t.live().gather_slices_async(ranges, view.span(), *s); });
  }
  return released(t, [&] { return t.live().gather_slices(ranges, view.span()); });
}

// @p used: the tensor at @p out, kept by the stream-ordered form.
std::vector<GatherPiece> gather_to_device(Transfer& t, std::int64_t dst_arg, std::uintptr_t out,
                                          std::size_t capacity, nb::handle stream, nb::object used) {
  const std::optional<cudaStream_t> s = stream_arg(stream);
  const std::size_t dst = device_of(t, dst_arg, "gather_to_device", "dst_device");
  if (s) {
    return ordered(t, *s, std::move(used),
                   [&] { return t.live().gather_to_device_async(dst, pointer(out), capacity, *s); });
  }
  return released(t, [&] { return t.live().gather_to_device(dst, pointer(out), capacity); });
}

nb::object registered_object(const Transfer& t, std::int64_t device_arg) {
  const std::size_t device = device_of(t, device_arg, "device_buffer", "device");
  if (!t.live().device_buffer(device).has_value() || !t.registered[device].tensor.is_valid())
    return nb::none();
  return t.registered[device].tensor;
}

nb::object registered_range(const Transfer& t, std::int64_t device_arg) {
  const std::size_t device = device_of(t, device_arg, "registered_range", "device");
  const std::optional<RegisteredBuffer> r = t.live().device_buffer(device);
  if (!r) return nb::none();
  return nb::make_tuple(reinterpret_cast<std::uintptr_t>(r->ptr), r->size);
}

// Ends the transfer now, as its destruction would, refused while an operation is in flight (another
// thread's call, a handle whose result is not collected): the engine is taken out first (later calls
// raise), then the streams of what stream-ordered calls keep and the operations of handles dropped unread
// are waited for and the engine ends (both with the GIL released), then the registered objects are let
// go. A second close does nothing, even while the first still waits (closed is true from its start).
void close(Transfer& t) {
  if (!t.engine) return;
  if (t.in_flight > 0)
    throw Error(
        Errc::invalid_argument,
        "gpuxfer.Transfer.close: " + std::to_string(t.in_flight) +
            " operation(s) in flight (another thread's call, or a handle whose result is not collected): "
            "wait for them first");
  std::unique_ptr<InterGpuTransfer> engine = std::move(t.engine);
  t.kept.release();
  {
    nb::gil_scoped_release gil;
    engine.reset();
  }
  t.registered.assign(t.registered.size(), Held{});
  t.retired.clear();
}

void bind_piece(nb::module_& m) {
  nb::class_<GatherPiece>(m, "GatherPiece", "Where one device's bytes landed in a concatenated gather")
      .def_ro("device", &GatherPiece::device)
      .def_ro("offset", &GatherPiece::offset)
      .def_ro("size", &GatherPiece::size)
      .def("__iter__",
           [](const GatherPiece& p) { return nb::iter(nb::make_tuple(p.device, p.offset, p.size)); })
      .def("__repr__", [](const GatherPiece& p) {
        return "GatherPiece(device=" + std::to_string(p.device) + ", offset=" + std::to_string(p.offset) +
               ", size=" + std::to_string(p.size) + ")";
      });
}

}  // namespace

void bind_transfer(nb::module_& m) {
  bind_piece(m);
  m.attr("_BLOCKING_UNDER_CAPTURE") = blocking_under_capture;
  m.def(
      "_wait_for_stream",
      [](std::uintptr_t stream, int ordinal, const std::string& what) {
        wait_for_stream(reinterpret_cast<cudaStream_t>(stream), ordinal, what);
      },
      nb::arg("stream"), nb::arg("ordinal"), nb::arg("what"),
      "Waits (GIL released) for a stream's work queued so far; refused with UnsupportedError while it captures");
  m.def(
      "_stream_wait",
      [](std::uintptr_t stream, std::uintptr_t producer, int ordinal, const std::string& what) {
        stream_wait_stream(reinterpret_cast<cudaStream_t>(stream), reinterpret_cast<cudaStream_t>(producer),
                           ordinal, what);
      },
      nb::arg("stream"), nb::arg("producer"), nb::arg("ordinal"), nb::arg("what"),
      "Makes stream wait on the GPU for producer's work queued so far (an event); nothing while stream "
      "captures");
  nb::class_<Transfer>(m, "_Transfer")
      .def(
          "__init__", [](Transfer* self, const Manager& manager) { new (self) Transfer(manager.ptr); },
          nb::arg("manager"))
      .def_prop_ro("manager", [](const Transfer& t) { return Manager{t.manager}; })
      .def_prop_ro("closed", [](const Transfer& t) { return !t.engine; })
      .def(
          "_check_open", [](const Transfer& t) { (void)t.live(); },
          "Raises InvalidArgumentError once the transfer is closed")
      .def("close", &close, doc::close)
      .def("_set_device_buffer", &set_device_buffer, nb::arg("device"), nb::arg("ptr"), nb::arg("nbytes"),
           nb::arg("stream"), nb::arg("tensor"), nb::arg("stream_owner").none())
      .def("clear_device_buffer", &clear_device_buffer, nb::arg("device"), doc::clear_device_buffer)
      .def("device_buffer", &registered_object, nb::arg("device"), doc::device_buffer)
      .def("registered_range", &registered_range, nb::arg("device"), doc::registered_range)
      .def("copy_buffer", &copy_buffer, nb::arg("src_device"), nb::arg("dst_device"), nb::arg("data"),
           nb::kw_only(), nb::arg("stream") = nb::none(), doc::copy_buffer)
      .def("copy_device_buffer", &copy_device_buffer, nb::arg("src_device"), nb::arg("dst_device"),
           nb::arg("path") = CopyPath::automatic, nb::kw_only(), nb::arg("stream") = nb::none(),
           doc::copy_device_buffer)
      .def("copy_device_buffer_async", &copy_device_buffer_async, nb::arg("src_device"),
           nb::arg("dst_device"), nb::arg("path") = CopyPath::automatic, nb::kw_only(),
           nb::arg("stream") = nb::none(), doc::copy_device_buffer_async)
      .def("broadcast", &broadcast, nb::arg("data"), nb::arg("path") = HostBroadcastPath::automatic,
           nb::kw_only(), nb::arg("stream") = nb::none(), doc::broadcast)
      .def("broadcast_from_device", &broadcast_from_device, nb::arg("root"),
           nb::arg("path") = DeviceBroadcastPath::automatic, nb::kw_only(), nb::arg("stream") = nb::none(),
           doc::broadcast_from_device)
      .def("gather", &gather, nb::arg("dst_device"), nb::kw_only(), nb::arg("stream") = nb::none(), doc::gather)
      .def(
          "gather_blocking",
          [](Transfer& t, std::int64_t dst_arg) {
            const std::size_t dst = device_of(t, dst_arg, "gather_blocking", "dst_device");
            return arrays(released(t, [&] { return t.live().gather_blocking(dst); }));
          },
          nb::arg("dst_device"), doc::gather_blocking)
      .def("gather_all", &gather_all, nb::kw_only(), nb::arg("stream") = nb::none(), doc::gather_all)
      .def("_time_gather_all", &time_gather_all, nb::arg("calls"),
           "Seconds of each of `calls` blocking gather_all calls timed in C++ (for the Python bench)")
      .def("gather_into", &gather_into, nb::arg("out"), nb::arg("skip_device") = nb::none(), nb::kw_only(),
           nb::arg("stream") = nb::none(), doc::gather_into)
      .def("_gather_slices", &gather_slices, nb::arg("slices"), nb::arg("out"), nb::arg("stream").none(),
           nb::arg("used").none())
      .def("_gather_to_device", &gather_to_device, nb::arg("dst_device"), nb::arg("out"), nb::arg("capacity"),
           nb::arg("stream").none(), nb::arg("used").none())
      .def_prop_ro(
          "_kept",
          [](Transfer& t) {
            t.reap();
            return t.kept.size();
          },
          "How many stream-ordered calls still keep what they use (their streams not past them yet)");
}

}  // namespace gpuxfer::python
