// Bad input of every public function that takes a device index: one past the end, on any machine.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/paths.hpp"
#include "cpu/bad_input.hpp"

namespace gpuxfer::test {
namespace {

// An index row: the message names the argument, the index and the device count.
CpuRow index_row(std::string name, std::string what, std::function<void(CpuWorld&)> call) {
  return {std::move(name), std::move(call), Errc::invalid_buffer, [what](const CpuWorld& w) {
            return Texts{what + " index " + n(w.bad), "is out of range",
                         "the manager has " + n(w.count) + " device"};
          }};
}

}  // namespace

std::vector<CpuRow> index_rows() {
  std::vector<CpuRow> rows;
  rows.push_back(index_row("set_device_buffer_index", "set_device_buffer device", [](CpuWorld& w) {
    w.xfer->set_device_buffer(w.bad, &w.host_word, sizeof w.host_word);
  }));
  rows.push_back(index_row("set_device_buffer_with_stream_index", "set_device_buffer device", [](CpuWorld& w) {
    w.xfer->set_device_buffer(w.bad, &w.host_word, sizeof w.host_word, cudaStreamLegacy);
  }));
  rows.push_back(index_row("set_device_buffer_null_pointer_and_index", "set_device_buffer device",
                           [](CpuWorld& w) { w.xfer->set_device_buffer(w.bad, nullptr, 0); }));
  rows.push_back(index_row("clear_device_buffer_index", "clear_device_buffer device",
                           [](CpuWorld& w) { w.xfer->clear_device_buffer(w.bad); }));
  rows.push_back(index_row("device_buffer_index", "device_buffer device",
                           [](CpuWorld& w) { (void)w.xfer->device_buffer(w.bad); }));
  rows.push_back(index_row("copy_buffer_source_index", "copy_buffer source device",
                           [](CpuWorld& w) { w.xfer->copy_buffer(w.bad, w.other, w.data); }));
  rows.push_back(index_row("copy_buffer_empty_data_source_index", "copy_buffer source device",
                           [](CpuWorld& w) { w.xfer->copy_buffer(w.bad, w.other, {}); }));
  for (const CopyPath path : kCopyPaths) {
    const std::string label = path_name(path);
    rows.push_back(index_row(std::string("copy_device_buffer_") + label + "_source_index",
                             "copy_device_buffer source device",
                             [path](CpuWorld& w) { w.xfer->copy_device_buffer(w.bad, w.other, path); }));
    rows.push_back(index_row(std::string("copy_device_buffer_async_") + label + "_source_index",
                             "copy_device_buffer source device", [path](CpuWorld& w) {
                               (void)w.xfer->copy_device_buffer_async(w.bad, w.other, path);
                             }));
  }
  for (const DeviceBroadcastPath path : kDeviceBroadcastPaths) {
    const std::string label = path_name(path);
    rows.push_back(index_row(std::string("broadcast_from_device_") + label + "_root_index",
                             "broadcast_from_device root",
                             [path](CpuWorld& w) { w.xfer->broadcast_from_device(w.bad, path); }));
  }
  rows.push_back(index_row("gather_destination_index", "gather destination device",
                           [](CpuWorld& w) { (void)w.xfer->gather(w.bad); }));
  rows.push_back(index_row("gather_blocking_destination_index", "gather destination device",
                           [](CpuWorld& w) { (void)w.xfer->gather_blocking(w.bad); }));
  rows.push_back(index_row("gather_into_skip_index", "gather_into skipped device",
                           [](CpuWorld& w) { (void)w.xfer->gather_into(w.data, w.bad); }));
  rows.push_back(index_row("gather_into_empty_output_skip_index", "gather_into skipped device",
                           [](CpuWorld& w) { (void)w.xfer->gather_into({}, w.bad); }));
  rows.push_back(index_row("gather_slices_slice_index", "gather_slices slice device", [](CpuWorld& w) {
    const DeviceSlice slices[] = {{w.bad, &w.host_word, sizeof w.host_word}};
    (void)w.xfer->gather_slices(slices, w.data);
  }));
  // An empty slice is skipped, but its device index is still checked.
  rows.push_back(index_row("gather_slices_empty_slice_index", "gather_slices slice device", [](CpuWorld& w) {
    const DeviceSlice slices[] = {{w.bad, nullptr, 0}};
    (void)w.xfer->gather_slices(slices, {});
  }));
  rows.push_back(
      index_row("gather_to_device_destination_index", "gather_to_device destination device",
                [](CpuWorld& w) { (void)w.xfer->gather_to_device(w.bad, &w.host_word, sizeof w.host_word); }));
  rows.push_back(index_row("gather_to_device_null_output_index", "gather_to_device destination device",
                           [](CpuWorld& w) { (void)w.xfer->gather_to_device(w.bad, nullptr, 0); }));
  rows.push_back(
      index_row("manager_device_index", "device", [](CpuWorld& w) { (void)w.manager->device(w.bad); }));
  rows.push_back(index_row("manager_link_source_index", "source device",
                           [](CpuWorld& w) { (void)w.manager->link(w.bad, w.other); }));
  rows.push_back(index_row("manager_peer_enabled_source_index", "source device",
                           [](CpuWorld& w) { (void)w.manager->peer_enabled(w.bad, w.other); }));
  return rows;
}

}  // namespace gpuxfer::test
