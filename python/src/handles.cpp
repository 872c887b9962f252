// TransferHandle and GatherHandle: event-based completion, no thread per operation. ready() never blocks
// (gpuxfer.Transfer.gather_async polls it from the event loop); wait() and get() release the GIL.
#include <vector>

#include <nanobind/stl/vector.h>

#include <gpuxfer/transfer_handle.hpp>

#include "bindings.hpp"
#include "pinned_block.hpp"
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
          "ready", [](const Copy& h) { return h.handle.ready(); }, "True when done; never blocks")
      .def("wait", &wait<TransferHandle>, "Blocks (GIL released) until done");
  nb::class_<Gather>(m, "GatherHandle", "Completion of Transfer.gather: one host array per source device")
      .def(
          "ready", [](const Gather& h) { return h.handle.ready(); }, "True when done; never blocks")
      .def("wait", &wait<GatherHandle>, "Blocks (GIL released) until done")
      .def("get", &collect,
           "Waits, then returns one numpy array per source device (ascending, the destination skipped, None "
           "where nothing was registered); call once");
}

}  // namespace gpuxfer::python
