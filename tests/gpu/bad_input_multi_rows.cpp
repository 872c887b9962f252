// Bad input that needs two devices: memory and streams of the wrong device, sizes that differ between
// devices, paths that need peer access.
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpu/bad_input.hpp"

namespace gpuxfer::test {

// Memory or a stream of device 1 is another GPU's only where devices 0 and 1 are separate GPUs.
constexpr const char* kOtherGpu = "memory or a stream of another GPU";

std::vector<GpuRow> multi_rows() {
  std::vector<GpuRow> r;
  auto peer_off = [](Options& o) { o.enable_peer_access = false; };
  r.push_back({"set_device_buffer_memory_of_another_device",
               [](GpuWorld& w) { w.xfer->set_device_buffer(0, w.spare[1], 16); }, Errc::invalid_buffer,
               [](const GpuWorld& w) {
                 return Texts{"set_device_buffer on device 0",
                              "belongs to CUDA ordinal " + n(w.ordinal[1]) + ", not " + n(w.ordinal[0])};
               },
               {},
               {},
               kOtherGpu});
  r.push_back({"set_device_buffer_producer_stream_of_another_device",
               [](GpuWorld& w) { w.xfer->set_device_buffer(0, w.spare[0], 16, w.stream[1]); }, Errc::invalid_argument,
               [](const GpuWorld& w) {
                 return Texts{"set_device_buffer: the producer stream belongs to ordinal " + n(w.ordinal[1]) +
                              ", the buffer to device 0"};
               },
               {},
               {},
               kOtherGpu});
  for (const CopyPath path : kCopyPaths) {
    const std::string p = path_name(path);
    r.push_back({"copy_device_buffer_" + p + "_source_larger_than_the_destination",
                 [path](GpuWorld& w) { w.xfer->copy_device_buffer(1, 0, path); }, Errc::invalid_argument,
                 [](const GpuWorld& w) {
                   return Texts{"copy_device_buffer: " + n(w.size[1]) + " bytes do not fit the buffer of " +
                                n(w.size[0]) + " bytes registered on device 0"};
                 }});
    r.push_back({"copy_device_buffer_async_" + p + "_source_larger_than_the_destination",
                 [path](GpuWorld& w) { (void)w.xfer->copy_device_buffer_async(1, 0, path); },
                 Errc::invalid_argument,
                 [](const GpuWorld& w) { return Texts{n(w.size[1]) + " bytes do not fit"}; }});
    r.push_back(
        {"copy_device_buffer_" + p + "_source_without_buffer",
         [path](GpuWorld& w) { w.xfer->copy_device_buffer(1, 0, path); }, Errc::invalid_buffer,
         [](const GpuWorld&) { return Texts{"copy_device_buffer source: no buffer is registered on device 1"}; },
         [](GpuWorld& w) { w.xfer->clear_device_buffer(1); }});
    r.push_back({"copy_device_buffer_" + p + "_destination_without_buffer",
                 [path](GpuWorld& w) { w.xfer->copy_device_buffer(0, 1, path); }, Errc::invalid_buffer,
                 [](const GpuWorld&) {
                   return Texts{"copy_device_buffer destination: no buffer is registered on device 1"};
                 },
                 [](GpuWorld& w) { w.xfer->clear_device_buffer(1); }});
    r.push_back({"copy_device_buffer_" + p + "_freed_source",
                 [path](GpuWorld& w) { w.xfer->copy_device_buffer(1, 0, path); }, Errc::invalid_buffer,
                 [](const GpuWorld&) {
                   return Texts{"registered on device 1", "freed or reallocated"};
                 },
                 [](GpuWorld& w) { w.register_freed(1, kRegistered); }});
    r.push_back({"copy_device_buffer_" + p + "_freed_destination",
                 [path](GpuWorld& w) { w.xfer->copy_device_buffer(0, 1, path); }, Errc::invalid_buffer,
                 [](const GpuWorld&) {
                   return Texts{"registered on device 1", "freed or reallocated"};
                 },
                 [](GpuWorld& w) { w.register_freed(1, kMiB); }});
  }
  r.push_back(
      {"copy_device_buffer_peer_without_peer_access",
       [](GpuWorld& w) { w.xfer->copy_device_buffer(0, 1, CopyPath::peer); },
       Errc::unsupported,
       [](const GpuWorld&) {
         return Texts{"copy_device_buffer: no peer access between device 0 and device 1", "peer access off"};
       },
       {},
       peer_off});
  r.push_back({"copy_device_buffer_async_peer_without_peer_access",
               [](GpuWorld& w) { (void)w.xfer->copy_device_buffer_async(0, 1, CopyPath::peer); },
               Errc::unsupported,
               [](const GpuWorld&) { return Texts{"no peer access between device 0 and device 1"}; },
               {},
               peer_off});
  r.push_back({"copy_buffer_source_index_with_a_valid_destination",
               [](GpuWorld& w) { w.xfer->copy_buffer(w.count, 1, w.data(16)); }, Errc::invalid_buffer,
               [](const GpuWorld& w) { return index_texts("copy_buffer source device", w.count, w.count); }});
  r.push_back({"copy_buffer_into_a_device_without_buffer",
               [](GpuWorld& w) { w.xfer->copy_buffer(0, 1, w.data(16)); }, Errc::invalid_buffer,
               [](const GpuWorld&) { return Texts{"copy_buffer: no buffer is registered on device 1"}; },
               [](GpuWorld& w) { w.xfer->clear_device_buffer(1); }});
  r.push_back({"broadcast_scatter_allgather_without_peer_access",
               [](GpuWorld& w) { w.xfer->broadcast(w.data(4096), HostBroadcastPath::scatter_allgather); },
               Errc::unsupported,
               [](const GpuWorld&) {
                 return Texts{"broadcast: scatter_allgather needs peer access between every pair"};
               },
               {},
               peer_off});
  r.push_back({"broadcast_data_larger_than_the_second_buffer",
               [](GpuWorld& w) { w.xfer->broadcast(w.data(w.size[0])); }, Errc::invalid_argument,
               [](const GpuWorld&) { return Texts{"bytes registered on device 1"}; },
               [](GpuWorld& w) { w.xfer->set_device_buffer(1, w.buffer[1], w.size[0] - 1); }});
  for (const DeviceBroadcastPath path : kDeviceBroadcastPaths) {
    const std::string p = path_name(path);
    r.push_back({"broadcast_from_device_" + p + "_root_larger_than_a_buffer",
                 [path](GpuWorld& w) { w.xfer->broadcast_from_device(1, path); }, Errc::invalid_argument,
                 [](const GpuWorld& w) {
                   return Texts{"broadcast_from_device: the root's " + n(w.size[1]) +
                                " bytes do not fit the buffer of " + n(w.size[0]) +
                                " bytes registered on device 0"};
                 }});
    r.push_back({"broadcast_from_device_" + p + "_freed_destination",
                 [path](GpuWorld& w) { w.xfer->broadcast_from_device(0, path); }, Errc::invalid_buffer,
                 [](const GpuWorld&) {
                   return Texts{"registered on device 1", "freed or reallocated"};
                 },
                 [](GpuWorld& w) { w.register_freed(1, kMiB); }});
  }
  r.push_back(
      {"gather_into_output_too_small_with_a_skip",
       [](GpuWorld& w) { (void)w.xfer->gather_into(std::span(w.pageable).first(w.total() - w.size[0] - 1), 0); },
       Errc::invalid_argument,
       [](const GpuWorld& w) {
         return Texts{"the output holds " + n(w.total() - w.size[0] - 1) +
                      " bytes, the registered buffers need " + n(w.total() - w.size[0])};
       }});
  r.push_back({"gather_blocking_freed_source", [](GpuWorld& w) { (void)w.xfer->gather_blocking(1); },
               Errc::invalid_buffer,
               [](const GpuWorld&) {
                 return Texts{"registered on device 0", "freed or reallocated"};
               },
               [](GpuWorld& w) { w.register_freed(0, kMiB); }});
  r.push_back({"gather_freed_source", [](GpuWorld& w) { (void)w.xfer->gather(1); }, Errc::invalid_buffer,
               [](const GpuWorld&) {
                 return Texts{"registered on device 0", "freed or reallocated"};
               },
               [](GpuWorld& w) { w.register_freed(0, kMiB); }});
  r.push_back(
      {"gather_slices_memory_of_another_device",
       [](GpuWorld& w) {
         const DeviceSlice slices[] = {{0, w.spare[1], 16}};
         (void)w.xfer->gather_slices(slices, w.pageable);
       },
       Errc::invalid_buffer,
       [](const GpuWorld& w) {
         return Texts{"gather_slices slice on device 0", "belongs to CUDA ordinal " + n(w.ordinal[1])};
       },
       {},
       {},
       kOtherGpu});
  r.push_back(
      {"gather_to_device_output_on_another_device",
       [](GpuWorld& w) { (void)w.xfer->gather_to_device(0, w.output[1], kAlloc); }, Errc::invalid_buffer,
       [](const GpuWorld& w) {
         return Texts{"gather_to_device output on device 0", "belongs to CUDA ordinal " + n(w.ordinal[1])};
       },
       {},
       {},
       kOtherGpu});
  return r;
}


}  // namespace gpuxfer::test
