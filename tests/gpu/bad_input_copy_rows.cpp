// Bad input of the copies (copy_buffer, copy_device_buffer) and the broadcasts (broadcast,
// broadcast_from_device), on every path.
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpu/bad_input.hpp"

namespace gpuxfer::test {

std::vector<GpuRow> copy_rows() {
  std::vector<GpuRow> r;
  // --- copy_buffer ----------------------------------------------------------------------------------
  r.push_back(
      {"copy_buffer_destination_index", [](GpuWorld& w) { w.xfer->copy_buffer(0, w.count, w.data(16)); },
       Errc::invalid_buffer,
       [](const GpuWorld& w) { return index_texts("copy_buffer destination device", w.count, w.count); }});
  r.push_back({"copy_buffer_source_index", [](GpuWorld& w) { w.xfer->copy_buffer(w.count, 0, w.data(16)); },
               Errc::invalid_buffer,
               [](const GpuWorld& w) { return index_texts("copy_buffer source device", w.count, w.count); }});
  r.push_back({"copy_buffer_data_larger_than_the_destination",
               [](GpuWorld& w) { w.xfer->copy_buffer(0, 0, w.data(w.size[0] + 1)); }, Errc::invalid_argument,
               [](const GpuWorld& w) {
                 return Texts{"copy_buffer: " + n(w.size[0] + 1) + " bytes do not fit the buffer of " +
                              n(w.size[0]) + " bytes registered on device 0"};
               }});
  r.push_back(
      {"copy_buffer_pinned_data_larger_than_the_destination",
       [](GpuWorld& w) { w.xfer->copy_buffer(0, 0, w.pinned.first(w.size[0] + 1)); }, Errc::invalid_argument,
       [](const GpuWorld& w) { return Texts{"copy_buffer: " + n(w.size[0] + 1) + " bytes do not fit"}; }});
  r.push_back({"copy_buffer_destination_without_buffer",
               [](GpuWorld& w) { w.xfer->copy_buffer(0, 0, w.data(16)); }, Errc::invalid_buffer,
               [](const GpuWorld&) { return Texts{"copy_buffer: no buffer is registered on device 0"}; },
               [](GpuWorld& w) { w.xfer->clear_device_buffer(0); }});
  r.push_back({"copy_buffer_null_data",
               [](GpuWorld& w) {
                 w.xfer->copy_buffer(0, 0,
                                     std::span<const std::byte>(static_cast<const std::byte*>(nullptr), 16));
               },
               Errc::invalid_argument, [](const GpuWorld&) { return Texts{"copy_buffer: data is null"}; }});
  r.push_back({"copy_buffer_destination_freed", [](GpuWorld& w) { w.xfer->copy_buffer(0, 0, w.data(16)); },
               Errc::invalid_buffer,
               [](const GpuWorld&) {
                 return Texts{"registered on device 0", "freed or reallocated"};
               },
               [](GpuWorld& w) { w.register_freed(0, kMiB); }});

  // --- copy_device_buffer ------------------------------------------------------------------------------
  for (const CopyPath path : kCopyPaths) {
    const std::string p = path_name(path);
    r.push_back(
        {"copy_device_buffer_" + p + "_same_device",
         [path](GpuWorld& w) { w.xfer->copy_device_buffer(0, 0, path); }, Errc::invalid_argument,
         [](const GpuWorld&) { return Texts{"copy_device_buffer: source and destination are both device 0"}; }});
    r.push_back({"copy_device_buffer_async_" + p + "_same_device",
                 [path](GpuWorld& w) { (void)w.xfer->copy_device_buffer_async(0, 0, path); },
                 Errc::invalid_argument,
                 [](const GpuWorld&) { return Texts{"source and destination are both device 0"}; }});
    r.push_back({"copy_device_buffer_" + p + "_destination_index",
                 [path](GpuWorld& w) { w.xfer->copy_device_buffer(0, w.count, path); }, Errc::invalid_buffer,
                 [](const GpuWorld& w) {
                   return index_texts("copy_device_buffer destination device", w.count, w.count);
                 }});
    r.push_back(
        {"copy_device_buffer_" + p + "_source_index",
         [path](GpuWorld& w) { w.xfer->copy_device_buffer(w.count, 0, path); }, Errc::invalid_buffer,
         [](const GpuWorld& w) { return index_texts("copy_device_buffer source device", w.count, w.count); }});
  }

  // --- broadcast -------------------------------------------------------------------------------------
  for (const HostBroadcastPath path : kHostBroadcastPaths) {
    const std::string p = path_name(path);
    r.push_back(
        {"broadcast_" + p + "_device_without_buffer",
         [path](GpuWorld& w) { w.xfer->broadcast(w.data(16), path); }, Errc::invalid_buffer,
         [](const GpuWorld& w) { return Texts{"broadcast: no buffer is registered on device " + n(w.last())}; },
         [](GpuWorld& w) { w.xfer->clear_device_buffer(w.last()); }});
    r.push_back({"broadcast_" + p + "_data_larger_than_a_buffer",
                 [path](GpuWorld& w) { w.xfer->broadcast(w.data(w.size[0] + 1), path); }, Errc::invalid_argument,
                 [](const GpuWorld& w) {
                   return Texts{"broadcast: " + n(w.size[0] + 1) + " bytes do not fit the buffer of " +
                                n(w.size[0]) + " bytes registered on device 0"};
                 }});
    r.push_back({"broadcast_" + p + "_null_data",
                 [path](GpuWorld& w) {
                   w.xfer->broadcast(std::span<const std::byte>(static_cast<const std::byte*>(nullptr), 16),
                                     path);
                 },
                 Errc::invalid_argument, [](const GpuWorld&) { return Texts{"broadcast: data is null"}; }});
    r.push_back({"broadcast_" + p + "_freed_buffer",
                 [path](GpuWorld& w) { w.xfer->broadcast(w.data(16), path); }, Errc::invalid_buffer,
                 [](const GpuWorld& w) {
                   return Texts{"registered on device " + n(w.last()), "freed or reallocated"};
                 },
                 [](GpuWorld& w) { w.register_freed(w.last(), kMiB); }});
  }

  // --- broadcast_from_device -----------------------------------------------------------------------
  for (const DeviceBroadcastPath path : kDeviceBroadcastPaths) {
    const std::string p = path_name(path);
    r.push_back({"broadcast_from_device_" + p + "_root_index",
                 [path](GpuWorld& w) { w.xfer->broadcast_from_device(w.count, path); }, Errc::invalid_buffer,
                 [](const GpuWorld& w) { return index_texts("broadcast_from_device root", w.count, w.count); }});
    r.push_back({"broadcast_from_device_" + p + "_device_without_buffer",
                 [path](GpuWorld& w) { w.xfer->broadcast_from_device(0, path); }, Errc::invalid_buffer,
                 [](const GpuWorld& w) {
                   return Texts{"broadcast_from_device: no buffer is registered on device " + n(w.last())};
                 },
                 [](GpuWorld& w) { w.xfer->clear_device_buffer(w.last()); }});
    r.push_back({"broadcast_from_device_" + p + "_freed_root",
                 [path](GpuWorld& w) { w.xfer->broadcast_from_device(0, path); }, Errc::invalid_buffer,
                 [](const GpuWorld&) {
                   return Texts{"registered on device 0", "freed or reallocated"};
                 },
                 [](GpuWorld& w) { w.register_freed(0, kMiB); }});
  }
  r.push_back({"broadcast_from_device_nccl_disabled",
               [](GpuWorld& w) { w.xfer->broadcast_from_device(0, DeviceBroadcastPath::nccl); },
               Errc::unsupported,
               [](const GpuWorld&) {
                 return Texts{"broadcast_from_device: NCCL is disabled", "GPUXFER_NCCL"};
               },
               {},
               [](Options& o) { o.enable_nccl = false; }});

  return r;
}

}  // namespace gpuxfer::test
