// The _gpuxfer extension module. Importing it needs no GPU: CUDA is first touched when a Manager or a
// Communicator is made.
#include <gpuxfer/version.hpp>

#include "bindings.hpp"

NB_MODULE(_gpuxfer, m) {
  namespace py = gpuxfer::python;
  m.doc() = "gpuxfer's C++ core; use the gpuxfer package, not this module";
  m.attr("__version__") = gpuxfer::version_string;
  py::bind_errors(m);
  py::bind_options(m);
  py::bind_manager(m);
  py::bind_host(m);
  py::bind_pinned(m);
  py::bind_handles(m);
  py::bind_transfer(m);
  py::bind_communicator(m);  // after bind_transfer: its gather returns GatherPiece
  py::bind_blocks(m);
}
