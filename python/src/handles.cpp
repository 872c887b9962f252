// TransferHandle and GatherHandle: event-based completion, no thread per operation. ready() never blocks
// (gpuxfer.Transfer.gather_async polls it from the event loop); wait(), get() and stream_wait() release
// the GIL.
#include <optional>
#include <vector>

#include <nanobind/stl/vector.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/transfer_handle.hpp>

#include "bindings.hpp"
#include "docstrings.hpp"
#include "pinned_block.hpp"
#include "stream_order.hpp"
#include "transfer.hpp"

namespace gpuxfer::python {
namespace {

template <typename Handle>
void wait(PyHandle<Handle>& h) {
  {
    nb::gil_scoped_release released;
    h.handle.wait();
  }
  h.finish();
}

template <typename Handle>
void stream_wait(const PyHandle<Handle>& h, nb::handle stream) {
  const std::optional<cudaStream_t> s = stream_arg(stream);
  if (!s) {
    throw Error(
        Errc::invalid_argument,
        "stream_wait: stream is required (a stream object or an int handle; 0 is the legacy default stream)");
  }
  nb::gil_scoped_release released;
  h.handle.stream_wait(*s);
}

nb::list collect(PyHandle<GatherHandle>& h) {
  std::vector<HostBuffer> buffers;
  {
    nb::gil_scoped_release released;
    buffers = h.handle.get();
  }
  h.finish();
  nb::list arrays;
  for (HostBuffer& b : buffers) arrays.append(host_array(std::move(b)));
  return arrays;
}

}  // namespace

void bind_handles(nb::module_& m) {
  using Copy = PyHandle<TransferHandle>;
  using Gather = PyHandle<GatherHandle>;
  nb::class_<Copy>(m, "TransferHandle", "Completion of an asynchronous copy")
      .def(
          "ready", [](const Copy& h) { return h.handle.ready(); }, doc::handle_ready)
      .def("wait", &wait<TransferHandle>, doc::handle_wait)
      .def("stream_wait", &stream_wait<TransferHandle>, nb::arg("stream"), doc::handle_stream_wait);
  nb::class_<Gather>(m, "GatherHandle", "Completion of Transfer.gather: one host array per source device")
      .def(
          "ready", [](const Gather& h) { return h.handle.ready(); }, doc::handle_ready)
      .def("wait", &wait<GatherHandle>, doc::handle_wait)
      .def("stream_wait", &stream_wait<GatherHandle>, nb::arg("stream"), doc::handle_stream_wait)
      .def("get", &collect, doc::handle_get);
}

}  // namespace gpuxfer::python
