// host_view, the device-pointer view of a DLPack tensor, and register_host.
#include "host_memory.hpp"

#include <cstdint>
#include <string>
#include <utility>

#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <gpuxfer/host_registration.hpp>

#include "bindings.hpp"
#include "docstrings.hpp"

namespace gpuxfer::python {
namespace {

constexpr int dl_cpu = 1, dl_cuda = 2, dl_cuda_host = 3, dl_cuda_managed = 13;

template <typename Array>
bool compact(const Array& a) {
  if (a.stride_ptr() == nullptr) return true;
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    if (a.shape(i) == 0) return true;  // no bytes: any strides (frameworks export 0 or anything) will do
  }
  std::int64_t expected = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected) return false;
    expected *= static_cast<std::int64_t>(a.shape(i));
  }
  return true;
}

// Raises gpuxfer.InvalidHostArrayError: an InvalidArgumentError (code invalid_argument), as a device
// tensor that is no C-contiguous CUDA memory gives, and a TypeError, as these errors were before.
[[noreturn]] void refuse(const std::string& message) {
  nb::object cls = nb::module_::import_("gpuxfer._errors").attr("InvalidHostArrayError");
  nb::object error = cls(message);  // worded as the C++ errors are: "gpuxfer invalid_argument: ..."
  PyErr_SetObject(cls.ptr(), error.ptr());
  throw nb::python_error();
}

template <typename Array>
HostView view_of(nb::handle obj, const char* what) {
  Array a;
  if (!nb::try_cast(obj, a, false)) {
    refuse(std::string("expected ") + what + " (buffer protocol or __dlpack__), got " +
           nb::cast<std::string>(nb::str(obj.type())));
  }
  if (a.device_type() != dl_cpu && a.device_type() != dl_cuda_host) {
    refuse(std::string("expected ") + what + " in host memory, got an array on DLPack device " +
           std::to_string(a.device_type()));
  }
  if (!compact(a)) refuse("expected a C-contiguous host array: no copy is made behind your back");
  HostView view;
  view.data = static_cast<std::byte*>(const_cast<void*>(static_cast<const void*>(a.data())));
  view.bytes = a.nbytes();
  view.keep = nb::ndarray<nb::ro>(a);
  return view;
}

// A DLPack tensor in device memory: (pointer, bytes, DLPack device type, device id, read-only), or None
// when @p obj is no DLPack tensor of CUDA memory (the caller then tries __cuda_array_interface__).
// nanobind says read-only only by refusing a writable import: a tensor it imports read-only alone is one
// whose (versioned) DLPack says so, read as a source and refused by the caller where it would be written.
nb::object device_view(nb::handle obj) {
  nb::ndarray<nb::ro> a;
  bool readonly = false;
  if (nb::ndarray<> writable; nb::try_cast(obj, writable, false)) {
    a = nb::ndarray<nb::ro>(writable);
  } else if (nb::try_cast(obj, a, false)) {
    readonly = true;
  } else {
    return nb::none();
  }
  if (a.device_type() != dl_cuda && a.device_type() != dl_cuda_managed) return nb::none();
  if (!compact(a))
    throw nb::type_error("expected a C-contiguous device tensor: no copy is made behind your back");
  return nb::make_tuple(reinterpret_cast<std::uintptr_t>(a.data()), a.nbytes(), a.device_type(),
                        a.device_id(), readonly);
}

// register_host's result: the registration, the array it page-locks and that array's export (which
// keeps a resizable array's bytes in place), kept alive together; declared so that the registration
// ends first.
struct Registration {
  Registration(nb::object a, nb::object e, HostRegistration r) noexcept
      : array(std::move(a)), export_(std::move(e)), registration(std::move(r)) {}
  Registration(Registration&&) noexcept = default;
  Registration& operator=(Registration&&) noexcept = default;
  /// Unregisters with the GIL released (cudaHostUnregister waits for the device's work).
  ~Registration() {
    if (registration.empty()) return;
    nb::gil_scoped_release released;
    registration.reset();
  }

  nb::object array;
  nb::object export_;
  HostRegistration registration;

  void close() {
    {
      nb::gil_scoped_release released;
      registration.reset();
    }
    export_ = nb::none();
    array = nb::none();
  }
};

}  // namespace

nb::object HostView::exported() const {
  return nb::capsule(new nb::ndarray<nb::ro>(keep),
                     [](void* import) noexcept { delete static_cast<nb::ndarray<nb::ro>*>(import); });
}

HostView host_view(nb::handle obj, bool writable) {
  return writable ? view_of<nb::ndarray<>>(obj, "a writable host array")
                  : view_of<nb::ndarray<nb::ro>>(obj, "a host array or bytes-like object");
}

void bind_host(nb::module_& m) {
  m.def("_device_view", &device_view, nb::arg("obj"));
  m.def(
      "_host_view",
      [](nb::handle obj, bool writable) {
        HostView v = host_view(obj, writable);
        return nb::make_tuple(reinterpret_cast<std::uintptr_t>(v.data), v.bytes);
      },
      nb::arg("obj"), nb::arg("writable") = false);

  nb::class_<Registration>(m, "HostRegistration",
                           "Caller memory page-locked (cudaHostRegister) while this lives; a context manager")
      .def_prop_ro("size", [](const Registration& r) { return r.registration.size(); })
      .def_prop_ro("array", [](const Registration& r) { return r.array; })
      .def_prop_ro("active", [](const Registration& r) { return !r.registration.empty(); })
      .def("close", &Registration::close, "Unregisters the memory now")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](Registration& r, nb::args) {
        r.close();
        return false;
      });
  m.def(
      "register_host",
      [](nb::handle array) {
        HostView view = host_view(array, true);
        HostRegistration registration;
        {
          nb::gil_scoped_release released;
          registration = register_host(view.span());
        }
        return Registration{nb::borrow(array), view.exported(), std::move(registration)};
      },
      nb::arg("array"), doc::register_host);
}

}  // namespace gpuxfer::python
