// _Transfer: every InterGpuTransfer operation with the GIL released. Device memory arrives as
// (pointer, bytes) from gpuxfer/_arrays.py, which reads DLPack and __cuda_array_interface__; host memory as
// any array host_view accepts. gpuxfer.Transfer (python/gpuxfer/_transfer.py) is the public face.
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "host_memory.hpp"
#include "manager.hpp"
#include "pinned_block.hpp"
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

// Runs @p op with the GIL released, counted in flight so that no registered tensor dies meanwhile.
template <typename Op>
auto released(Transfer& t, Op&& op) {
  InFlight counted(t);
  nb::gil_scoped_release gil;
  return op();
}

void set_device_buffer(Transfer& t, std::size_t device, std::uintptr_t ptr, std::size_t bytes,
                       std::uintptr_t stream, nb::object tensor, nb::object stream_owner) {
  released(t, [&] {
    t.engine.set_device_buffer(device, pointer(ptr), bytes, reinterpret_cast<cudaStream_t>(stream));
  });
  t.hold(device, {std::move(tensor), std::move(stream_owner)});
}

void clear_device_buffer(Transfer& t, std::size_t device) {
  t.engine.clear_device_buffer(device);
  t.hold(device, {});
}

nb::object gather(nb::handle self, std::size_t dst) {
  Transfer& t = nb::cast<Transfer&>(self);
  InFlight counted(t);  // until the handle counts itself: nothing registered meanwhile may die
  GatherHandle h = released(t, [&] { return t.engine.gather(dst); });
  return nb::cast(new PyHandle<GatherHandle>(std::move(h), t, nb::borrow(self)),
                  nb::rv_policy::take_ownership);
}

nb::object copy_device_buffer_async(nb::handle self, std::size_t src, std::size_t dst, CopyPath path) {
  Transfer& t = nb::cast<Transfer&>(self);
  InFlight counted(t);
  TransferHandle h = released(t, [&] { return t.engine.copy_device_buffer_async(src, dst, path); });
  return nb::cast(new PyHandle<TransferHandle>(std::move(h), t, nb::borrow(self)),
                  nb::rv_policy::take_ownership);
}

std::vector<GatherPiece> gather_into(Transfer& t, nb::handle out, std::optional<std::size_t> skip) {
  HostView view = host_view(out, true);
  return released(t, [&] { return t.engine.gather_into(view.span(), skip); });
}

std::size_t gather_slices(Transfer& t, const std::vector<Slice>& slices, nb::handle out) {
  std::vector<DeviceSlice> ranges;
  ranges.reserve(slices.size());
  for (auto [device, ptr, bytes] : slices) ranges.push_back({device, pointer(ptr), bytes});
  HostView view = host_view(out, true);
  return released(t, [&] { return t.engine.gather_slices(ranges, view.span()); });
}

nb::object registered_object(const Transfer& t, std::size_t device) {
  if (!t.engine.device_buffer(device).has_value() || !t.registered[device].tensor.is_valid())
    return nb::none();
  return t.registered[device].tensor;
}

nb::object registered_range(const Transfer& t, std::size_t device) {
  const std::optional<RegisteredBuffer> r = t.engine.device_buffer(device);
  if (!r) return nb::none();
  return nb::make_tuple(reinterpret_cast<std::uintptr_t>(r->ptr), r->size);
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
  nb::class_<Transfer>(m, "_Transfer")
      .def(
          "__init__", [](Transfer* self, const Manager& manager) { new (self) Transfer(manager.ptr); },
          nb::arg("manager"))
      .def_prop_ro("manager", [](const Transfer& t) { return Manager{t.engine.manager()}; })
      .def("_set_device_buffer", &set_device_buffer, nb::arg("device"), nb::arg("ptr"), nb::arg("nbytes"),
           nb::arg("stream"), nb::arg("tensor"), nb::arg("stream_owner").none())
      .def("clear_device_buffer", &clear_device_buffer, nb::arg("device"))
      .def("device_buffer", &registered_object, nb::arg("device"), "The object registered on device, or None")
      .def("registered_range", &registered_range, nb::arg("device"),
           "(pointer, bytes) of device's registration as the C++ registry holds it, or None")
      .def(
          "copy_buffer",
          [](Transfer& t, std::size_t src, std::size_t dst, nb::handle data) {
            HostView view = host_view(data, false);
            released(t, [&] { t.engine.copy_buffer(src, dst, view.cspan()); });
          },
          nb::arg("src_device"), nb::arg("dst_device"), nb::arg("data"))
      .def(
          "copy_device_buffer",
          [](Transfer& t, std::size_t src, std::size_t dst, CopyPath path) {
            released(t, [&] { t.engine.copy_device_buffer(src, dst, path); });
          },
          nb::arg("src_device"), nb::arg("dst_device"), nb::arg("path") = CopyPath::automatic)
      .def("copy_device_buffer_async", &copy_device_buffer_async, nb::arg("src_device"),
           nb::arg("dst_device"), nb::arg("path") = CopyPath::automatic)
      .def(
          "broadcast",
          [](Transfer& t, nb::handle data, HostBroadcastPath path) {
            HostView view = host_view(data, false);
            released(t, [&] { t.engine.broadcast(view.cspan(), path); });
          },
          nb::arg("data"), nb::arg("path") = HostBroadcastPath::automatic)
      .def(
          "broadcast_from_device",
          [](Transfer& t, std::size_t root, DeviceBroadcastPath path) {
            released(t, [&] { t.engine.broadcast_from_device(root, path); });
          },
          nb::arg("root"), nb::arg("path") = DeviceBroadcastPath::automatic)
      .def("gather", &gather, nb::arg("dst_device"))
      .def(
          "gather_blocking",
          [](Transfer& t, std::size_t dst) {
            return arrays(released(t, [&] { return t.engine.gather_blocking(dst); }));
          },
          nb::arg("dst_device"))
      .def("gather_all",
           [](Transfer& t) { return arrays(released(t, [&] { return t.engine.gather_all(); })); })
      .def("gather_into", &gather_into, nb::arg("out"), nb::arg("skip_device") = nb::none())
      .def("_gather_slices", &gather_slices, nb::arg("slices"), nb::arg("out"))
      .def(
          "_gather_to_device",
          [](Transfer& t, std::size_t dst, std::uintptr_t out, std::size_t capacity) {
            return released(t, [&] { return t.engine.gather_to_device(dst, pointer(out), capacity); });
          },
          nb::arg("dst_device"), nb::arg("out"), nb::arg("capacity"));
}

}  // namespace gpuxfer::python
