// Options (the fields of the C++ struct, the environment through Options.from_env) and the enums that
// choose an operation's path.
#include <string>
#include <vector>

#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <gpuxfer/options.hpp>
#include <gpuxfer/transfer_paths.hpp>

#include "bindings.hpp"
#include "docstrings.hpp"

namespace gpuxfer::python {

void bind_options(nb::module_& m) {
  nb::enum_<NumaPlacement>(m, "NumaPlacement")
      .value("automatic", NumaPlacement::automatic)
      .value("on", NumaPlacement::on)
      .value("off", NumaPlacement::off);
  nb::enum_<CopyPath>(m, "CopyPath")
      .value("automatic", CopyPath::automatic)
      .value("peer", CopyPath::peer)
      .value("staged", CopyPath::staged);
  nb::enum_<HostBroadcastPath>(m, "HostBroadcastPath")
      .value("automatic", HostBroadcastPath::automatic)
      .value("per_device", HostBroadcastPath::per_device)
      .value("scatter_allgather", HostBroadcastPath::scatter_allgather);
  nb::enum_<DeviceBroadcastPath>(m, "DeviceBroadcastPath")
      .value("automatic", DeviceBroadcastPath::automatic)
      .value("nccl", DeviceBroadcastPath::nccl)
      .value("peer", DeviceBroadcastPath::peer);

  nb::class_<Options>(m, "Options", "Settings of a Manager; every field has a GPUXFER_* variable")
      .def(nb::init<>(), "The built-in defaults, without the environment")
      .def_static("from_env", &Options::from_env, "The defaults with the GPUXFER_* variables applied")
      .def("validate", &Options::validate)
      .def_rw("devices", &Options::devices)
      .def_rw("min_devices", &Options::min_devices)
      .def_rw("enable_peer_access", &Options::enable_peer_access)
      .def_rw("enable_nccl", &Options::enable_nccl)
      .def_rw("pool_limit_bytes", &Options::pool_limit_bytes)
      .def_rw("pool_reserve", &Options::pool_reserve)
      .def_rw("chunk_bytes", &Options::chunk_bytes)
      .def_rw("host_threads", &Options::host_threads)
      .def_rw("numa", &Options::numa)
      .def_rw("capture_copy_kernels", &Options::capture_copy_kernels)
      .def_rw("simulated_devices", &Options::simulated_devices)
      .def("__repr__", [](const Options& o) {
        std::string devices;
        for (int d : o.devices) devices += (devices.empty() ? "" : ",") + std::to_string(d);
        return "Options(devices=[" + devices + "], min_devices=" + std::to_string(o.min_devices) +
               ", enable_peer_access=" + (o.enable_peer_access ? "True" : "False") +
               ", enable_nccl=" + (o.enable_nccl ? "True" : "False") +
               ", pool_limit_bytes=" + std::to_string(o.pool_limit_bytes) +
               ", chunk_bytes=" + std::to_string(o.chunk_bytes) +
               ", host_threads=" + std::to_string(o.host_threads) + ", numa='" +
               std::string(to_string(o.numa)) +
               "', capture_copy_kernels=" + (o.capture_copy_kernels ? "True" : "False") +
               ", simulated_devices=" + std::to_string(o.simulated_devices) + ")";
      });
  m.def("parse_size", &parse_size, nb::arg("text"), doc::parse_size);
}

}  // namespace gpuxfer::python
