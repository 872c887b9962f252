// gpuxfer::Error becomes the gpuxfer.Error subclass of its code (gpuxfer/_errors.py defines them, so
// that Python code and the stubs see ordinary classes), carrying .code and the C++ message.
#include <exception>
#include <string>

#include <nanobind/stl/string.h>

#include <gpuxfer/error.hpp>

#include "bindings.hpp"

namespace gpuxfer::python {

std::size_t device_index(std::int64_t value, std::size_t count, const char* call, const char* name) {
  if (value >= 0 && static_cast<std::uint64_t>(value) < count) return static_cast<std::size_t>(value);
  const std::string range = count == 0   ? "the manager has no devices"
                            : count == 1 ? "0 (the manager has 1 device)"
                                         : "0 to " + std::to_string(count - 1) + " (the manager has " +
                                               std::to_string(count) + " devices)";
  throw Error(Errc::invalid_buffer,
              std::string(call) + ": " + name + "=" + std::to_string(value) + " is not a device index: " + range);
}
namespace {

// The classes by code name, gpuxfer._errors.BY_CODE. Held for the life of the process on purpose: the
// translator may run while the interpreter tears modules down.
PyObject* by_code = nullptr;

void raise_error(const Error& error) {
  const std::string code{to_string(error.code())};
  nb::handle classes{by_code};
  nb::object cls = classes.attr("get")(code, classes["error"]);
  nb::object instance = cls(error.what(), code, error.message());
  PyErr_SetObject(cls.ptr(), instance.ptr());
}

}  // namespace

void bind_errors(nb::module_& m) {
  nb::module_ errors = nb::module_::import_("gpuxfer._errors");
  by_code = errors.attr("BY_CODE").inc_ref().ptr();
  nb::register_exception_translator([](const std::exception_ptr& thrown, void*) {
    try {
      std::rethrow_exception(thrown);
    } catch (const Error& error) {
      raise_error(error);
    }
  });
  // A way to see the translation work without a GPU (tests/python/test_package.py).
  m.def(
      "_raise",
      [](const std::string& code, const std::string& message) {
        for (int c = 0; c <= static_cast<int>(Errc::comm_error); ++c) {
          if (to_string(static_cast<Errc>(c)) == code) throw Error(static_cast<Errc>(c), message);
        }
        throw nb::value_error(("no Errc named '" + code + "'").c_str());
      },
      nb::arg("code"), nb::arg("message"));
}

}  // namespace gpuxfer::python
