// PinnedBlock, the Python owner of one leased HostBuffer, and the kDLCUDAHost DLPack view of a
// PinnedArray. The numpy subclass itself is Python (gpuxfer/_pinned.py); it registers the factory that
// host_array calls.
#include "pinned_block.hpp"

#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include <nanobind/ndarray.h>

#include "bindings.hpp"

namespace gpuxfer::python {
namespace {

constexpr int dl_cuda_host = 3;

struct PinnedBlock {
  PinnedBlock() = default;
  explicit PinnedBlock(HostBuffer b) noexcept : buffer(std::move(b)) {}
  PinnedBlock(PinnedBlock&&) noexcept = default;
  PinnedBlock& operator=(PinnedBlock&&) noexcept = default;
  /// With the GIL released: the last block of a pool that outlived its manager frees every cached block
  /// (cudaFreeHost, which waits for the device's work).
  ~PinnedBlock() {
    if (buffer.data() == nullptr) return;
    nb::gil_scoped_release gil;
    buffer.reset();
  }

  HostBuffer buffer;
};

// The buffer protocol over the block's bytes (writable, 1-D bytes): numpy arrays are made over it.
int block_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  PinnedBlock* b = nb::inst_ptr<PinnedBlock>(self);
  return PyBuffer_FillInfo(view, self, b->buffer.data(), static_cast<Py_ssize_t>(b->buffer.size()), 0, flags);
}

PyType_Slot block_slots[] = {{Py_bf_getbuffer, reinterpret_cast<void*>(block_getbuffer)}, {0, nullptr}};

// PinnedArray's factory, set once by gpuxfer/_pinned.py and kept for the life of the process (a static
// nb::object would be released after the interpreter is gone).
PyObject* array_factory = nullptr;

// @p array's bytes (a PinnedArray over a PinnedBlock: the caller checked) as a DLPack producer of device
// kDLCUDAHost: the same pointer, shape, strides and dtype, keeping @p array alive.
template <typename... Flags>
nb::object cuda_host_view(nb::handle array) {
  nb::ndarray<Flags...> a;
  if (!nb::try_cast(array, a, false))
    throw nb::buffer_error("PinnedArray.__dlpack__: numpy could not export the array through DLPack");
  std::vector<std::size_t> shape(a.ndim());
  std::vector<std::int64_t> strides(a.ndim());
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    shape[i] = a.shape(i);
    strides[i] = a.stride(i);
  }
  nb::ndarray<nb::array_api, Flags...> view(a.data(), a.ndim(), shape.data(), nb::borrow(array),
                                            strides.data(), a.dtype(), dl_cuda_host, 0);
  return view.cast();
}

}  // namespace

nb::object host_array(HostBuffer&& buffer) {
  if (buffer.empty()) return nb::none();
  if (array_factory == nullptr)
    throw std::runtime_error("gpuxfer: PinnedArray is not registered (import gpuxfer, not gpuxfer._gpuxfer)");
  nb::object block = nb::cast(PinnedBlock(std::move(buffer)), nb::rv_policy::move);
  PyObject* array = PyObject_CallOneArg(array_factory, block.ptr());
  if (array == nullptr) throw nb::python_error();
  return nb::steal(array);
}

void bind_pinned(nb::module_& m) {
  nb::class_<PinnedBlock>(
      m, "PinnedBlock", nb::type_slots(block_slots),
      "One pinned HostBuffer, let go when this dies: a lease from the manager's pool (Transfer's gathers), "
      "or a view of the root's shared segment (Communicator.gather_to_host); the memory under a gathered "
      "PinnedArray (its .base)")
      .def_prop_ro("nbytes", [](const PinnedBlock& b) { return b.buffer.size(); })
      .def_prop_ro("ptr",
                   [](const PinnedBlock& b) { return reinterpret_cast<std::uintptr_t>(b.buffer.data()); });
  // For the tests without a GPU: a block over an empty lease (real ones need a GPU).
  m.def("_empty_pinned_block", [] { return PinnedBlock{}; });
  m.def(
      "_set_pinned_array_factory",
      [](nb::handle factory) {
        Py_XDECREF(array_factory);
        array_factory = factory.inc_ref().ptr();
      },
      nb::arg("factory"));
  m.def(
      "_cuda_host_view",
      [](nb::handle array, bool writable) {
        return writable ? cuda_host_view<>(array) : cuda_host_view<nb::ro>(array);
      },
      nb::arg("array"), nb::arg("writable"),
      "A DLPack producer (__dlpack__, __dlpack_device__ == (3, 0)) over a PinnedArray's bytes, no copy");
}

}  // namespace gpuxfer::python
