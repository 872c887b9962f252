// Manager(**options): the keyword arguments, and the environment's variables for the fields not given
// (values given win; validated once, together), then
// MultiGpuManager::create with the GIL released. Devices, links, NCCL and the pinned pool's counters.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <gpuxfer/device_info.hpp>
#include <gpuxfer/error.hpp>
#include <gpuxfer/options.hpp>

#include "bindings.hpp"
#include "docstrings.hpp"
#include "manager.hpp"

namespace gpuxfer::python {
namespace {

// Each keyword and the variable of its field (include/gpuxfer/options.hpp's table).
struct OptionName {
  std::string_view field;
  std::string_view variable;
};
constexpr std::array<OptionName, 11> option_names{{{"devices", "GPUXFER_DEVICES"},
                                                  {"min_devices", "GPUXFER_MIN_DEVICES"},
                                                  {"enable_peer_access", "GPUXFER_PEER_ACCESS"},
                                                  {"enable_nccl", "GPUXFER_NCCL"},
                                                  {"pool_limit_bytes", "GPUXFER_POOL_LIMIT"},
                                                  {"pool_reserve", "GPUXFER_POOL_RESERVE"},
                                                  {"chunk_bytes", "GPUXFER_CHUNK_BYTES"},
                                                  {"host_threads", "GPUXFER_HOST_THREADS"},
                                                  {"numa", "GPUXFER_NUMA"},
                                                  {"capture_copy_kernels", "GPUXFER_CAPTURE_KERNELS"},
                                                  {"simulated_devices", "GPUXFER_SIMULATED_DEVICES"}}};

// Strings where the environment takes them too: sizes ("4GiB"), NUMA placement ("auto"), devices ("0,1"),
// block lists ("2x256MiB").
nb::object option_value(std::string_view name, nb::handle value) {
  if (!nb::isinstance<nb::str>(value)) return nb::borrow(value);
  const std::string text = nb::cast<std::string>(value);
  if (name == "pool_limit_bytes" || name == "chunk_bytes") return nb::cast(parse_size(text));
  if (name == "numa") return nb::cast(parse_numa_placement(text));
  if (name == "pool_reserve") return nb::cast(parse_size_list(text));
  if (name == "devices") return nb::cast(parse_device_list(text));
  return nb::borrow(value);
}

// What each keyword accepts, for the message when a value does not fit its field's type.
std::string_view accepted(std::string_view name) {
  if (name == "devices") return "a list of CUDA ordinals (ints >= 0) or a string like \"0,1\"";
  if (name == "min_devices") return "an int >= 0";
  if (name == "pool_limit_bytes" || name == "chunk_bytes") return "a byte count: an int >= 0 or a string like \"4GiB\"";
  if (name == "host_threads") return "an int from 1 to 256";
  if (name == "numa") return "a NumaPlacement or \"auto\", \"on\", \"off\"";
  if (name == "simulated_devices") return "an int from 0 to 64";
  return "True or False";
}

// Sets the field @p name of @p options, naming the argument, its value and what it accepts where the value
// does not fit (nanobind would raise its "incompatible function arguments" for the setter).
void set_option(nb::object& options, const std::string& name, nb::handle value) {
  const auto given = [&] { return "Manager(" + name + "=" + nb::cast<std::string>(nb::repr(value)) + "): "; };
  try {
    nb::setattr(options, name.c_str(), option_value(name, value));
  } catch (const nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    const std::string message = given() + name + " takes " + std::string(accepted(name));
    // An int out of its field's range (host_threads=-3) is a bad value; a list for a bool, a bad type.
    if (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) throw Error(Errc::invalid_option, message);
    throw nb::type_error(message.c_str());
  } catch (const Error& e) {  // a string that does not parse ("4XB", "0,x")
    throw Error(e.code(), given() + e.message());
  }
}

// The keyword arguments over the defaults, then the environment's variables of the fields not given (read
// and validated once, with the values given: a variable whose field a keyword sets is not read, and a
// combination is judged as it will be used).
Options options_from(const nb::kwargs& kwargs) {
  nb::object options = nb::cast(Options{});
  std::vector<std::string_view> hidden;
  for (auto [key, value] : kwargs) {
    const std::string name = nb::cast<std::string>(key);
    const auto known = std::find_if(option_names.begin(), option_names.end(),
                                    [&](const OptionName& n) { return n.field == name; });
    if (known == option_names.end()) {
      throw nb::type_error(("Manager() got an unexpected keyword argument '" + name + "'").c_str());
    }
    set_option(options, name, value);
    hidden.push_back(known->variable);
  }
  const EnvLookup environment = [&hidden](std::string_view variable) -> std::optional<std::string> {
    if (std::find(hidden.begin(), hidden.end(), variable) != hidden.end()) return std::nullopt;
    const char* value = std::getenv(std::string(variable).c_str());
    return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
  };
  return apply_env(nb::cast<Options>(options), environment);
}

nb::dict pool_stats(const PoolStats& s) {
  nb::dict d;
  d["in_use"] = s.in_use;
  d["cached"] = s.cached;
  d["pending"] = s.pending;
  d["peak_in_use"] = s.peak_in_use;
  d["limit"] = s.limit;
  d["allocations"] = s.allocations;
  d["reuses"] = s.reuses;
  return d;
}

void bind_device_info(nb::module_& m) {
  nb::class_<DeviceInfo>(m, "DeviceInfo", "One CUDA device as the manager sees it")
      .def_ro("ordinal", &DeviceInfo::ordinal)
      .def_ro("name", &DeviceInfo::name)
      .def_ro("total_memory", &DeviceInfo::total_memory)
      .def_ro("cc_major", &DeviceInfo::cc_major)
      .def_ro("cc_minor", &DeviceInfo::cc_minor)
      .def_ro("pci_bus_id", &DeviceInfo::pci_bus_id)
      .def_ro("numa_node", &DeviceInfo::numa_node)
      .def_ro("numa_cpus", &DeviceInfo::numa_cpus)
      .def_ro("staging_node", &DeviceInfo::staging_node)
      .def_ro("copy_engines", &DeviceInfo::copy_engines)
      .def_ro("multiprocessors", &DeviceInfo::multiprocessors)
      .def_ro("simulated", &DeviceInfo::simulated)
      .def("__repr__", [](const DeviceInfo& d) {
        return "DeviceInfo(ordinal=" + std::to_string(d.ordinal) + ", name='" + d.name + "', pci_bus_id='" +
               d.pci_bus_id + "'" + (d.simulated ? ", simulated=True" : "") + ")";
      });
}

}  // namespace

void bind_manager(nb::module_& m) {
  bind_device_info(m);
  nb::class_<Manager>(m, "Manager",
                      "The devices of this process, their links, copy streams and staging memory")
      .def(
          "__init__",
          [](Manager* self, const nb::kwargs& kwargs) {
            Options options = options_from(kwargs);
            std::shared_ptr<MultiGpuManager> made;
            {
              nb::gil_scoped_release released;
              made = MultiGpuManager::create(std::move(options));
            }
            new (self) Manager{std::move(made)};
          },
          doc::manager)
      .def_prop_ro("device_count", [](const Manager& s) { return s.ptr->device_count(); })
      .def_prop_ro("devices",
                   [](const Manager& s) {
                     auto span = s.ptr->devices();
                     return std::vector<DeviceInfo>(span.begin(), span.end());
                   })
      .def(
          "device",
          [](const Manager& s, std::int64_t i) {
            return s.ptr->device(device_index(i, s.ptr->device_count(), "Manager.device", "index"));
          },
          nb::arg("index"), doc::manager_device)
      .def(
          "link",
          [](const Manager& s, std::int64_t a, std::int64_t b) {
            const std::size_t n = s.ptr->device_count();
            return std::string(to_string(
                s.ptr->link(device_index(a, n, "Manager.link", "src"), device_index(b, n, "Manager.link", "dst"))));
          },
          nb::arg("src"), nb::arg("dst"), doc::manager_link)
      .def(
          "peer_enabled",
          [](const Manager& s, std::int64_t a, std::int64_t b) {
            const std::size_t n = s.ptr->device_count();
            return s.ptr->peer_enabled(device_index(a, n, "Manager.peer_enabled", "src"),
                                       device_index(b, n, "Manager.peer_enabled", "dst"));
          },
          nb::arg("src"), nb::arg("dst"), doc::manager_peer_enabled)
      .def_prop_ro("all_peers_enabled", [](const Manager& s) { return s.ptr->all_peers_enabled(); })
      .def_prop_ro("nccl_available", [](const Manager& s) { return s.ptr->nccl_available(); })
      .def_prop_ro("nccl_version", [](const Manager& s) { return s.ptr->nccl_version(); })
      .def_prop_ro("nccl_status", [](const Manager& s) { return s.ptr->nccl_status(); },
                   "Why NCCL is not available, or an empty string when it is")
      .def_prop_ro("device_status", [](const Manager& s) { return s.ptr->device_status(); })
      .def_prop_ro("options", [](const Manager& s) { return s.ptr->options(); })
      .def(
          "pinned_pool_stats", [](const Manager& s) { return pool_stats(s.ptr->pinned_pool().stats()); },
          doc::pool_stats)
      .def(
          "trim_pool",
          [](Manager& s) {
            nb::gil_scoped_release released;
            s.ptr->pinned_pool().trim();
          },
          doc::trim_pool);
}

}  // namespace gpuxfer::python
