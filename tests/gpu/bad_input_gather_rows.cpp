// Bad input of the gathers: gather, gather_blocking, gather_all, gather_into, gather_slices,
// gather_to_device.
#include <functional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu/bad_input.hpp"

namespace gpuxfer::test {

std::vector<GpuRow> gather_rows() {
  std::vector<GpuRow> r;
  // --- gather, gather_blocking, gather_all -------------------------------------------------------------
  r.push_back({"gather_destination_index", [](GpuWorld& w) { (void)w.xfer->gather(w.count); },
               Errc::invalid_buffer,
               [](const GpuWorld& w) { return index_texts("gather destination device", w.count, w.count); }});
  r.push_back({"gather_blocking_destination_index", [](GpuWorld& w) { (void)w.xfer->gather_blocking(w.count); },
               Errc::invalid_buffer,
               [](const GpuWorld& w) { return index_texts("gather destination device", w.count, w.count); }});
  r.push_back({"gather_all_freed_buffer", [](GpuWorld& w) { (void)w.xfer->gather_all(); }, Errc::invalid_buffer,
               [](const GpuWorld&) {
                 return Texts{"registered on device 0", "freed or reallocated", "register it again"};
               },
               [](GpuWorld& w) { w.register_freed(0, kMiB); }});

  // --- gather_into -----------------------------------------------------------------------------------------
  r.push_back({"gather_into_output_too_small",
               [](GpuWorld& w) { (void)w.xfer->gather_into(std::span(w.pageable).first(w.total() - 1)); },
               Errc::invalid_argument,
               [](const GpuWorld& w) {
                 return Texts{"gather_into: the output holds " + n(w.total() - 1) +
                              " bytes, the registered buffers need " + n(w.total())};
               }});
  r.push_back({"gather_into_pinned_output_too_small",
               [](GpuWorld& w) { (void)w.xfer->gather_into(w.pinned.first(w.total() - 1)); },
               Errc::invalid_argument,
               [](const GpuWorld& w) { return Texts{"the output holds " + n(w.total() - 1) + " bytes"}; }});
  r.push_back({"gather_into_empty_output", [](GpuWorld& w) { (void)w.xfer->gather_into({}); },
               Errc::invalid_argument,
               [](const GpuWorld& w) {
                 return Texts{"the output holds 0 bytes, the registered buffers need " + n(w.total())};
               }});
  r.push_back({"gather_into_null_output",
               [](GpuWorld& w) {
                 (void)w.xfer->gather_into(std::span<std::byte>(static_cast<std::byte*>(nullptr), w.total()));
               },
               Errc::invalid_argument,
               [](const GpuWorld&) { return Texts{"gather_into: the output is null"}; }});
  r.push_back({"gather_into_skip_index", [](GpuWorld& w) { (void)w.xfer->gather_into(w.pageable, w.count); },
               Errc::invalid_buffer,
               [](const GpuWorld& w) { return index_texts("gather_into skipped device", w.count, w.count); }});
  r.push_back({"gather_into_freed_buffer", [](GpuWorld& w) { (void)w.xfer->gather_into(w.pageable); },
               Errc::invalid_buffer,
               [](const GpuWorld&) {
                 return Texts{"registered on device 0", "freed or reallocated"};
               },
               [](GpuWorld& w) { w.register_freed(0, kMiB); }});

  // --- gather_slices ---------------------------------------------------------------------------------------
  // A bad slice after a good one: (name, the slice, the Errc, what the message must contain).
  using Slice = DeviceSlice (*)(const GpuWorld&);
  using SliceTexts = Texts (*)(const GpuWorld&);
  const std::tuple<const char*, Slice, Errc, SliceTexts> slices[] = {
      {"gather_slices_device_index", [](const GpuWorld& w) { return DeviceSlice{w.count, w.spare[0], 16}; },
       Errc::invalid_buffer,
       [](const GpuWorld& w) { return index_texts("gather_slices slice device", w.count, w.count); }},
      {"gather_slices_empty_slice_device_index", [](const GpuWorld& w) { return DeviceSlice{w.count, nullptr, 0}; },
       Errc::invalid_buffer,
       [](const GpuWorld& w) { return index_texts("gather_slices slice device", w.count, w.count); }},
      {"gather_slices_null", [](const GpuWorld&) { return DeviceSlice{0, nullptr, 16}; }, Errc::invalid_buffer,
       [](const GpuWorld&) { return Texts{"gather_slices slice on device 0", "is null"}; }},
      {"gather_slices_pageable_host_memory",
       [](const GpuWorld& w) { return DeviceSlice{0, w.pageable.data(), 16}; }, Errc::invalid_buffer,
       [](const GpuWorld&) { return Texts{"gather_slices slice on device 0", "is not memory CUDA knows"}; }},
      {"gather_slices_pinned_host_memory", [](const GpuWorld& w) { return DeviceSlice{0, w.pinned.data(), 16}; },
       Errc::invalid_buffer, [](const GpuWorld&) { return Texts{"is pinned host memory, not device memory"}; }},
      {"gather_slices_past_the_allocation",
       [](const GpuWorld& w) { return DeviceSlice{0, w.spare[0] + kAlloc - 8, 9}; }, Errc::invalid_buffer,
       [](const GpuWorld&) { return Texts{"passes the end of its allocation", "only 8 bytes"}; }},
      {"gather_slices_freed_memory", [](const GpuWorld& w) { return DeviceSlice{0, w.freed[0], 16}; },
       Errc::invalid_buffer, [](const GpuWorld&) { return Texts{"gather_slices slice on device 0: pointer 0x"}; }},
  };
  for (const auto& [name, slice, code, texts] : slices) {
    r.push_back({name,
                 [slice](GpuWorld& w) {
                   const DeviceSlice both[] = {{0, w.buffer[0], 64}, slice(w)};
                   (void)w.xfer->gather_slices(both, w.pageable);
                 },
                 code, texts});
  }
  r.push_back({"gather_slices_output_too_small",
               [](GpuWorld& w) {
                 const DeviceSlice slices[] = {{0, w.spare[0], 4096}, {0, w.buffer[0], 1}};
                 (void)w.xfer->gather_slices(slices, std::span(w.pageable).first(4096));
               },
               Errc::invalid_argument,
               [](const GpuWorld&) {
                 return Texts{"gather_slices: the output holds 4096 bytes, the slices need 4097"};
               }});
  r.push_back({"gather_slices_pinned_output_too_small",
               [](GpuWorld& w) {
                 const DeviceSlice slices[] = {{0, w.spare[0], 4096}};
                 (void)w.xfer->gather_slices(slices, w.pinned.first(4095));
               },
               Errc::invalid_argument, [](const GpuWorld&) { return Texts{"the output holds 4095 bytes"}; }});

  // --- gather_to_device ---------------------------------------------------------------------------------
  r.push_back(
      {"gather_to_device_destination_index",
       [](GpuWorld& w) { (void)w.xfer->gather_to_device(w.count, w.output[0], kAlloc); }, Errc::invalid_buffer,
       [](const GpuWorld& w) { return index_texts("gather_to_device destination device", w.count, w.count); }});
  r.push_back({"gather_to_device_null_output",
               [](GpuWorld& w) { (void)w.xfer->gather_to_device(0, nullptr, kAlloc); }, Errc::invalid_buffer,
               [](const GpuWorld&) {
                 return Texts{"gather_to_device output on device 0", "is null"};
               }});
  r.push_back({"gather_to_device_pageable_output",
               [](GpuWorld& w) { (void)w.xfer->gather_to_device(0, w.pageable.data(), kAlloc); },
               Errc::invalid_buffer,
               [](const GpuWorld&) {
                 return Texts{"gather_to_device output on device 0", "is not memory CUDA knows"};
               }});
  r.push_back({"gather_to_device_pinned_output",
               [](GpuWorld& w) { (void)w.xfer->gather_to_device(0, w.pinned.data(), 4096); },
               Errc::invalid_buffer,
               [](const GpuWorld&) { return Texts{"is pinned host memory, not device memory"}; }});
  r.push_back({"gather_to_device_freed_output",
               [](GpuWorld& w) { (void)w.xfer->gather_to_device(0, w.freed[0], 4096); }, Errc::invalid_buffer,
               [](const GpuWorld&) { return Texts{"gather_to_device output on device 0: pointer 0x"}; }});
  r.push_back({"gather_to_device_capacity_past_the_allocation",
               [](GpuWorld& w) { (void)w.xfer->gather_to_device(0, w.output[0], kAlloc * w.count + 1); },
               Errc::invalid_buffer, [](const GpuWorld&) { return Texts{"passes the end of its allocation"}; }});
  r.push_back({"gather_to_device_capacity_too_small",
               [](GpuWorld& w) { (void)w.xfer->gather_to_device(0, w.output[0], w.total() - 1); },
               Errc::invalid_argument,
               [](const GpuWorld& w) {
                 return Texts{"gather_to_device: the output on device 0 holds " + n(w.total() - 1) +
                              " bytes, the registered buffers need " + n(w.total())};
               }});
  r.push_back(
      {"gather_to_device_capacity_zero", [](GpuWorld& w) { (void)w.xfer->gather_to_device(0, w.output[0], 0); },
       Errc::invalid_argument,
       [](const GpuWorld& w) { return Texts{"holds 0 bytes, the registered buffers need " + n(w.total())}; }});
  r.push_back({"gather_to_device_freed_source",
               [](GpuWorld& w) { (void)w.xfer->gather_to_device(0, w.output[0], kAlloc * w.count); },
               Errc::invalid_buffer,
               [](const GpuWorld& w) {
                 return Texts{"registered on device " + n(w.last()), "freed or reallocated"};
               },
               [](GpuWorld& w) { w.register_freed(w.last(), kMiB); }});

  return r;
}

}  // namespace gpuxfer::test
