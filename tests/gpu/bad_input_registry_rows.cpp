// Bad input of the registry (set_device_buffer, clear_device_buffer, device_buffer) and of the manager.
#include <limits>
#include <string>
#include <vector>

#include "gpu/bad_input.hpp"

namespace gpuxfer::test {

std::vector<GpuRow> registry_rows() {
  std::vector<GpuRow> r;
  // --- set_device_buffer, clear_device_buffer, device_buffer ---------------------------------------
  r.push_back({"set_device_buffer_null", [](GpuWorld& w) { w.xfer->set_device_buffer(0, nullptr, 16); },
               Errc::invalid_buffer,
               [](const GpuWorld&) {
                 return Texts{"set_device_buffer on device 0", "is null"};
               }});
  r.push_back({"set_device_buffer_null_size_zero", [](GpuWorld& w) { w.xfer->set_device_buffer(0, nullptr, 0); },
               Errc::invalid_buffer,
               [](const GpuWorld&) {
                 return Texts{"set_device_buffer on device 0", "is null"};
               }});
  r.push_back({"set_device_buffer_pageable_host_memory",
               [](GpuWorld& w) { w.xfer->set_device_buffer(0, w.pageable.data(), 4096); }, Errc::invalid_buffer,
               [](const GpuWorld&) {
                 return Texts{"set_device_buffer on device 0", "is not memory CUDA knows"};
               }});
  r.push_back({"set_device_buffer_pinned_host_memory",
               [](GpuWorld& w) { w.xfer->set_device_buffer(0, w.pinned.data(), 4096); }, Errc::invalid_buffer,
               [](const GpuWorld&) { return Texts{"is pinned host memory, not device memory"}; }});
  r.push_back({"set_device_buffer_past_the_allocation",
               [](GpuWorld& w) { w.xfer->set_device_buffer(0, w.spare[0], kAlloc + 1); }, Errc::invalid_buffer,
               [](const GpuWorld&) {
                 return Texts{std::string("(") + n(kAlloc + 1) + " bytes) passes the end of its allocation",
                              "only " + n(kAlloc) + " bytes"};
               }});
  r.push_back({"set_device_buffer_interior_past_the_end",
               [](GpuWorld& w) { w.xfer->set_device_buffer(0, w.spare[0] + kAlloc - 100, 101); },
               Errc::invalid_buffer,
               [](const GpuWorld&) {
                 return Texts{"passes the end of its allocation", "only 100 bytes"};
               }});
  r.push_back(
      {"set_device_buffer_size_max",
       [](GpuWorld& w) { w.xfer->set_device_buffer(0, w.spare[0], std::numeric_limits<std::size_t>::max()); },
       Errc::invalid_buffer, [](const GpuWorld&) { return Texts{"passes the end of its allocation"}; }});
  r.push_back({"set_device_buffer_freed_memory",
               [](GpuWorld& w) { w.xfer->set_device_buffer(0, w.freed[0], 16); }, Errc::invalid_buffer,
               [](const GpuWorld&) { return Texts{"set_device_buffer on device 0: pointer 0x"}; }});
  r.push_back({"set_device_buffer_index",
               [](GpuWorld& w) { w.xfer->set_device_buffer(w.count, w.spare[0], 16); }, Errc::invalid_buffer,
               [](const GpuWorld& w) { return index_texts("set_device_buffer device", w.count, w.count); }});
  r.push_back({"set_device_buffer_with_stream_index",
               [](GpuWorld& w) { w.xfer->set_device_buffer(w.count, w.spare[0], 16, w.stream[0]); },
               Errc::invalid_buffer,
               [](const GpuWorld& w) { return index_texts("set_device_buffer device", w.count, w.count); }});
  r.push_back({"clear_device_buffer_index", [](GpuWorld& w) { w.xfer->clear_device_buffer(w.count); },
               Errc::invalid_buffer,
               [](const GpuWorld& w) { return index_texts("clear_device_buffer device", w.count, w.count); }});
  r.push_back({"device_buffer_index", [](GpuWorld& w) { (void)w.xfer->device_buffer(w.count); },
               Errc::invalid_buffer,
               [](const GpuWorld& w) { return index_texts("device_buffer device", w.count, w.count); }});

  return r;
}

std::vector<GpuRow> manager_rows() {
  std::vector<GpuRow> r;
  // --- MultiGpuManager and its pool ---------------------------------------------------------------------
  r.push_back({"manager_device_index", [](GpuWorld& w) { (void)w.manager->device(w.count); },
               Errc::invalid_buffer, [](const GpuWorld& w) { return index_texts("device", w.count, w.count); }});
  r.push_back({"manager_link_destination_index", [](GpuWorld& w) { (void)w.manager->link(0, w.count); },
               Errc::invalid_buffer,
               [](const GpuWorld& w) { return index_texts("destination device", w.count, w.count); }});
  r.push_back({"manager_link_source_index", [](GpuWorld& w) { (void)w.manager->link(w.count, 0); },
               Errc::invalid_buffer,
               [](const GpuWorld& w) { return index_texts("source device", w.count, w.count); }});
  r.push_back({"manager_peer_enabled_destination_index",
               [](GpuWorld& w) { (void)w.manager->peer_enabled(0, w.count); }, Errc::invalid_buffer,
               [](const GpuWorld& w) { return index_texts("destination device", w.count, w.count); }});
  r.push_back({"manager_create_unknown_ordinal",
               [](GpuWorld& w) {
                 Options opts;
                 opts.devices = {0, static_cast<int>(w.count)};
                 (void)MultiGpuManager::create(opts);
               },
               Errc::invalid_option,
               [](const GpuWorld& w) {
                 return Texts{"Options::devices names CUDA ordinal " + n(w.count),
                              "only " + n(w.count) + " devices are visible"};
               }});
  r.push_back(more_devices_than_visible_row<GpuWorld>("manager_create_more_devices_than_visible"));
  r.push_back(manager_pool_above_limit_row<GpuWorld>("pool_acquire_above_the_limit"));
  return r;
}

}  // namespace gpuxfer::test
