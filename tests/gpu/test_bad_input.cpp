// Bad input on real devices, table-driven: every public function of InterGpuTransfer and MultiGpuManager
// against every bad input it can get (null, pageable and pinned host pointers, freed memory, sizes past
// an allocation, data larger than a destination, a device without a buffer, a buffer freed since it was
// registered, indices out of range, paths this machine cannot run, zero sizes that are refused) and, in
// the MultiGpu table, memory and streams of the wrong device. One row per (function, input): the Errc it
// must throw and the words its message must contain. A third table holds zero-size inputs that must be
// accepted. After every row: the registry is as before, every registered buffer holds its bytes, and
// the pinned pool's in-use, cached + pending and allocation counts are unchanged (the pool is warm, so
// an operation that leased and leaked, or allocated before checking its input, shows).
#include <functional>
#include <limits>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kAlloc = 2 * kMiB;  // allocations: a multiple of the 2 MiB granularity
constexpr std::size_t kRegistered = 64 * kKiB + 3;

std::string n(std::size_t value) { return std::to_string(value); }

using Texts = std::vector<std::string>;

// What a row may use. Device i has a buffer of registered(i) bytes (device 0's the smallest) at the start
// of an allocation of kAlloc bytes, filled with the test's pattern for i; spare(i) is an unregistered
// allocation of kAlloc bytes, output(i) one of kAlloc * devices bytes, freed(i) the address of an
// allocation freed after everything else was allocated.
struct World {
  MultiGpuManager* manager = nullptr;
  InterGpuTransfer* xfer = nullptr;
  std::size_t count = 0;
  std::vector<std::byte*> buffer;  // the registered buffers
  std::vector<std::size_t> size;   // their registered sizes
  std::vector<std::byte*> spare;
  std::vector<std::byte*> output;
  std::vector<std::byte*> freed;
  std::vector<int> ordinal;
  std::vector<cudaStream_t> stream;  // a non-blocking stream of each device
  std::span<std::byte> pinned;       // 1 MiB of pinned host memory
  std::vector<std::byte> pageable = std::vector<std::byte>(kAlloc, std::byte{7});
  // Allocates, registers and frees a buffer of @p bytes on @p device: a registration gone stale.
  std::function<void(std::size_t device, std::size_t bytes)> register_freed;

  [[nodiscard]] std::size_t last() const { return count - 1; }
  [[nodiscard]] std::size_t total() const {
    std::size_t sum = 0;
    for (const std::size_t s : size) sum += s;
    return sum;
  }
  [[nodiscard]] std::span<const std::byte> data(std::size_t bytes) const {
    return std::span(pageable).first(bytes);
  }
};

struct Row {
  std::string name;
  std::function<void(World&)> call;
  std::optional<Errc> code;                       // nullopt: the input is allowed and must not throw
  std::function<Texts(const World&)> texts = {};  // what the message must contain
  std::function<void(World&)> setup = {};         // changes the registry before the snapshot
  std::function<void(Options&)> options = {};     // the manager's options, when not the defaults
};

void PrintTo(const Row& row, std::ostream* os) { *os << row.name; }

Texts index_texts(const std::string& what, std::size_t index, std::size_t count) {
  return {what + " index " + n(index) + " is out of range", "the manager has " + n(count) + " device"};
}

// The rows every machine with one GPU or more can run.
std::vector<Row> single_rows() {
  std::vector<Row> r;
  // --- set_device_buffer, clear_device_buffer, device_buffer ---------------------------------------
  r.push_back({"set_device_buffer_null", [](World& w) { w.xfer->set_device_buffer(0, nullptr, 16); },
               Errc::invalid_buffer,
               [](const World&) {
                 return Texts{"set_device_buffer on device 0", "is null"};
               }});
  r.push_back({"set_device_buffer_null_size_zero", [](World& w) { w.xfer->set_device_buffer(0, nullptr, 0); },
               Errc::invalid_buffer,
               [](const World&) {
                 return Texts{"set_device_buffer on device 0", "is null"};
               }});
  r.push_back({"set_device_buffer_pageable_host_memory",
               [](World& w) { w.xfer->set_device_buffer(0, w.pageable.data(), 4096); }, Errc::invalid_buffer,
               [](const World&) {
                 return Texts{"set_device_buffer on device 0", "is not memory CUDA knows"};
               }});
  r.push_back({"set_device_buffer_pinned_host_memory",
               [](World& w) { w.xfer->set_device_buffer(0, w.pinned.data(), 4096); }, Errc::invalid_buffer,
               [](const World&) { return Texts{"is pinned host memory, not device memory"}; }});
  r.push_back({"set_device_buffer_past_the_allocation",
               [](World& w) { w.xfer->set_device_buffer(0, w.spare[0], kAlloc + 1); }, Errc::invalid_buffer,
               [](const World&) {
                 return Texts{"(" + n(kAlloc + 1) + " bytes) passes the end of its allocation",
                              "only " + n(kAlloc) + " bytes"};
               }});
  r.push_back({"set_device_buffer_interior_past_the_end",
               [](World& w) { w.xfer->set_device_buffer(0, w.spare[0] + kAlloc - 100, 101); },
               Errc::invalid_buffer,
               [](const World&) {
                 return Texts{"passes the end of its allocation", "only 100 bytes"};
               }});
  r.push_back(
      {"set_device_buffer_size_max",
       [](World& w) { w.xfer->set_device_buffer(0, w.spare[0], std::numeric_limits<std::size_t>::max()); },
       Errc::invalid_buffer, [](const World&) { return Texts{"passes the end of its allocation"}; }});
  r.push_back({"set_device_buffer_freed_memory",
               [](World& w) { w.xfer->set_device_buffer(0, w.freed[0], 16); }, Errc::invalid_buffer,
               [](const World&) { return Texts{"set_device_buffer on device 0: pointer 0x"}; }});
  r.push_back({"set_device_buffer_index",
               [](World& w) { w.xfer->set_device_buffer(w.count, w.spare[0], 16); }, Errc::invalid_buffer,
               [](const World& w) { return index_texts("set_device_buffer device", w.count, w.count); }});
  r.push_back({"set_device_buffer_with_stream_index",
               [](World& w) { w.xfer->set_device_buffer(w.count, w.spare[0], 16, w.stream[0]); },
               Errc::invalid_buffer,
               [](const World& w) { return index_texts("set_device_buffer device", w.count, w.count); }});
  r.push_back({"clear_device_buffer_index", [](World& w) { w.xfer->clear_device_buffer(w.count); },
               Errc::invalid_buffer,
               [](const World& w) { return index_texts("clear_device_buffer device", w.count, w.count); }});
  r.push_back({"device_buffer_index", [](World& w) { (void)w.xfer->device_buffer(w.count); },
               Errc::invalid_buffer,
               [](const World& w) { return index_texts("device_buffer device", w.count, w.count); }});

  // --- copy_buffer ----------------------------------------------------------------------------------
  r.push_back(
      {"copy_buffer_destination_index", [](World& w) { w.xfer->copy_buffer(0, w.count, w.data(16)); },
       Errc::invalid_buffer,
       [](const World& w) { return index_texts("copy_buffer destination device", w.count, w.count); }});
  r.push_back({"copy_buffer_source_index", [](World& w) { w.xfer->copy_buffer(w.count, 0, w.data(16)); },
               Errc::invalid_buffer,
               [](const World& w) { return index_texts("copy_buffer source device", w.count, w.count); }});
  r.push_back({"copy_buffer_data_larger_than_the_destination",
               [](World& w) { w.xfer->copy_buffer(0, 0, w.data(w.size[0] + 1)); }, Errc::invalid_argument,
               [](const World& w) {
                 return Texts{"copy_buffer: " + n(w.size[0] + 1) + " bytes do not fit the buffer of " +
                              n(w.size[0]) + " bytes registered on device 0"};
               }});
  r.push_back(
      {"copy_buffer_pinned_data_larger_than_the_destination",
       [](World& w) { w.xfer->copy_buffer(0, 0, w.pinned.first(w.size[0] + 1)); }, Errc::invalid_argument,
       [](const World& w) { return Texts{"copy_buffer: " + n(w.size[0] + 1) + " bytes do not fit"}; }});
  r.push_back({"copy_buffer_destination_without_buffer",
               [](World& w) { w.xfer->copy_buffer(0, 0, w.data(16)); }, Errc::invalid_buffer,
               [](const World&) { return Texts{"copy_buffer: no buffer is registered on device 0"}; },
               [](World& w) { w.xfer->clear_device_buffer(0); }});
  r.push_back({"copy_buffer_null_data",
               [](World& w) {
                 w.xfer->copy_buffer(0, 0,
                                     std::span<const std::byte>(static_cast<const std::byte*>(nullptr), 16));
               },
               Errc::invalid_argument, [](const World&) { return Texts{"copy_buffer: data is null"}; }});
  r.push_back({"copy_buffer_destination_freed", [](World& w) { w.xfer->copy_buffer(0, 0, w.data(16)); },
               Errc::invalid_buffer,
               [](const World&) {
                 return Texts{"registered on device 0", "freed or reallocated"};
               },
               [](World& w) { w.register_freed(0, kMiB); }});

  // --- copy_device_buffer ------------------------------------------------------------------------------
  for (const auto& [path, label] :
       {std::pair{CopyPath::automatic, "automatic"}, std::pair{CopyPath::peer, "peer"},
        std::pair{CopyPath::staged, "staged"}}) {
    const std::string p = label;
    r.push_back(
        {"copy_device_buffer_" + p + "_same_device",
         [path](World& w) { w.xfer->copy_device_buffer(0, 0, path); }, Errc::invalid_argument,
         [](const World&) { return Texts{"copy_device_buffer: source and destination are both device 0"}; }});
    r.push_back({"copy_device_buffer_async_" + p + "_same_device",
                 [path](World& w) { (void)w.xfer->copy_device_buffer_async(0, 0, path); },
                 Errc::invalid_argument,
                 [](const World&) { return Texts{"source and destination are both device 0"}; }});
    r.push_back({"copy_device_buffer_" + p + "_destination_index",
                 [path](World& w) { w.xfer->copy_device_buffer(0, w.count, path); }, Errc::invalid_buffer,
                 [](const World& w) {
                   return index_texts("copy_device_buffer destination device", w.count, w.count);
                 }});
    r.push_back(
        {"copy_device_buffer_" + p + "_source_index",
         [path](World& w) { w.xfer->copy_device_buffer(w.count, 0, path); }, Errc::invalid_buffer,
         [](const World& w) { return index_texts("copy_device_buffer source device", w.count, w.count); }});
  }

  // --- broadcast -------------------------------------------------------------------------------------
  for (const auto& [path, label] : {std::pair{HostBroadcastPath::automatic, "automatic"},
                                    std::pair{HostBroadcastPath::per_device, "per_device"},
                                    std::pair{HostBroadcastPath::scatter_allgather, "scatter_allgather"}}) {
    const std::string p = label;
    r.push_back(
        {"broadcast_" + p + "_device_without_buffer",
         [path](World& w) { w.xfer->broadcast(w.data(16), path); }, Errc::invalid_buffer,
         [](const World& w) { return Texts{"broadcast: no buffer is registered on device " + n(w.last())}; },
         [](World& w) { w.xfer->clear_device_buffer(w.last()); }});
    r.push_back({"broadcast_" + p + "_data_larger_than_a_buffer",
                 [path](World& w) { w.xfer->broadcast(w.data(w.size[0] + 1), path); }, Errc::invalid_argument,
                 [](const World& w) {
                   return Texts{"broadcast: " + n(w.size[0] + 1) + " bytes do not fit the buffer of " +
                                n(w.size[0]) + " bytes registered on device 0"};
                 }});
    r.push_back({"broadcast_" + p + "_null_data",
                 [path](World& w) {
                   w.xfer->broadcast(std::span<const std::byte>(static_cast<const std::byte*>(nullptr), 16),
                                     path);
                 },
                 Errc::invalid_argument, [](const World&) { return Texts{"broadcast: data is null"}; }});
    r.push_back({"broadcast_" + p + "_freed_buffer",
                 [path](World& w) { w.xfer->broadcast(w.data(16), path); }, Errc::invalid_buffer,
                 [](const World& w) {
                   return Texts{"registered on device " + n(w.last()), "freed or reallocated"};
                 },
                 [](World& w) { w.register_freed(w.last(), kMiB); }});
  }

  // --- broadcast_from_device -----------------------------------------------------------------------
  for (const auto& [path, label] :
       {std::pair{DeviceBroadcastPath::automatic, "automatic"}, std::pair{DeviceBroadcastPath::nccl, "nccl"},
        std::pair{DeviceBroadcastPath::peer, "peer"}}) {
    const std::string p = label;
    r.push_back({"broadcast_from_device_" + p + "_root_index",
                 [path](World& w) { w.xfer->broadcast_from_device(w.count, path); }, Errc::invalid_buffer,
                 [](const World& w) { return index_texts("broadcast_from_device root", w.count, w.count); }});
    r.push_back({"broadcast_from_device_" + p + "_device_without_buffer",
                 [path](World& w) { w.xfer->broadcast_from_device(0, path); }, Errc::invalid_buffer,
                 [](const World& w) {
                   return Texts{"broadcast_from_device: no buffer is registered on device " + n(w.last())};
                 },
                 [](World& w) { w.xfer->clear_device_buffer(w.last()); }});
    r.push_back({"broadcast_from_device_" + p + "_freed_root",
                 [path](World& w) { w.xfer->broadcast_from_device(0, path); }, Errc::invalid_buffer,
                 [](const World&) {
                   return Texts{"registered on device 0", "freed or reallocated"};
                 },
                 [](World& w) { w.register_freed(0, kMiB); }});
  }
  r.push_back({"broadcast_from_device_nccl_disabled",
               [](World& w) { w.xfer->broadcast_from_device(0, DeviceBroadcastPath::nccl); },
               Errc::unsupported,
               [](const World&) {
                 return Texts{"broadcast_from_device: NCCL is disabled", "GPUXFER_NCCL"};
               },
               {},
               [](Options& o) { o.enable_nccl = false; }});

  // --- gather, gather_blocking, gather_all -------------------------------------------------------------
  r.push_back({"gather_destination_index", [](World& w) { (void)w.xfer->gather(w.count); },
               Errc::invalid_buffer,
               [](const World& w) { return index_texts("gather destination device", w.count, w.count); }});
  r.push_back({"gather_blocking_destination_index", [](World& w) { (void)w.xfer->gather_blocking(w.count); },
               Errc::invalid_buffer,
               [](const World& w) { return index_texts("gather destination device", w.count, w.count); }});
  r.push_back({"gather_all_freed_buffer", [](World& w) { (void)w.xfer->gather_all(); }, Errc::invalid_buffer,
               [](const World&) {
                 return Texts{"registered on device 0", "freed or reallocated", "register it again"};
               },
               [](World& w) { w.register_freed(0, kMiB); }});

  // --- gather_into -----------------------------------------------------------------------------------------
  r.push_back({"gather_into_output_too_small",
               [](World& w) { (void)w.xfer->gather_into(std::span(w.pageable).first(w.total() - 1)); },
               Errc::invalid_argument,
               [](const World& w) {
                 return Texts{"gather_into: the output holds " + n(w.total() - 1) +
                              " bytes, the registered buffers need " + n(w.total())};
               }});
  r.push_back({"gather_into_pinned_output_too_small",
               [](World& w) { (void)w.xfer->gather_into(w.pinned.first(w.total() - 1)); },
               Errc::invalid_argument,
               [](const World& w) { return Texts{"the output holds " + n(w.total() - 1) + " bytes"}; }});
  r.push_back({"gather_into_empty_output", [](World& w) { (void)w.xfer->gather_into({}); },
               Errc::invalid_argument,
               [](const World& w) {
                 return Texts{"the output holds 0 bytes, the registered buffers need " + n(w.total())};
               }});
  r.push_back({"gather_into_null_output",
               [](World& w) {
                 (void)w.xfer->gather_into(std::span<std::byte>(static_cast<std::byte*>(nullptr), w.total()));
               },
               Errc::invalid_argument,
               [](const World&) { return Texts{"gather_into: the output is null"}; }});
  r.push_back({"gather_into_skip_index", [](World& w) { (void)w.xfer->gather_into(w.pageable, w.count); },
               Errc::invalid_buffer,
               [](const World& w) { return index_texts("gather_into skipped device", w.count, w.count); }});
  r.push_back({"gather_into_freed_buffer", [](World& w) { (void)w.xfer->gather_into(w.pageable); },
               Errc::invalid_buffer,
               [](const World&) {
                 return Texts{"registered on device 0", "freed or reallocated"};
               },
               [](World& w) { w.register_freed(0, kMiB); }});

  // --- gather_slices ---------------------------------------------------------------------------------------
  auto slices_row = [](std::string name, std::function<DeviceSlice(const World&)> slice, Errc code,
                       std::function<Texts(const World&)> texts) {
    return Row{std::move(name),
               [slice](World& w) {
                 const DeviceSlice slices[] = {{0, w.buffer[0], 64}, slice(w)};
                 (void)w.xfer->gather_slices(slices, w.pageable);
               },
               code, std::move(texts)};
  };
  r.push_back(slices_row(
      "gather_slices_device_index",
      [](const World& w) {
        return DeviceSlice{w.count, w.spare[0], 16};
      },
      Errc::invalid_buffer,
      [](const World& w) { return index_texts("gather_slices slice device", w.count, w.count); }));
  r.push_back(slices_row(
      "gather_slices_empty_slice_device_index",
      [](const World& w) {
        return DeviceSlice{w.count, nullptr, 0};
      },
      Errc::invalid_buffer,
      [](const World& w) { return index_texts("gather_slices slice device", w.count, w.count); }));
  r.push_back(slices_row(
      "gather_slices_null",
      [](const World&) {
        return DeviceSlice{0, nullptr, 16};
      },
      Errc::invalid_buffer,
      [](const World&) {
        return Texts{"gather_slices slice on device 0", "is null"};
      }));
  r.push_back(slices_row(
      "gather_slices_pageable_host_memory",
      [](const World& w) {
        return DeviceSlice{0, w.pageable.data(), 16};
      },
      Errc::invalid_buffer,
      [](const World&) {
        return Texts{"gather_slices slice on device 0", "is not memory CUDA knows"};
      }));
  r.push_back(slices_row(
      "gather_slices_pinned_host_memory",
      [](const World& w) {
        return DeviceSlice{0, w.pinned.data(), 16};
      },
      Errc::invalid_buffer, [](const World&) { return Texts{"is pinned host memory, not device memory"}; }));
  r.push_back(slices_row(
      "gather_slices_past_the_allocation",
      [](const World& w) {
        return DeviceSlice{0, w.spare[0] + kAlloc - 8, 9};
      },
      Errc::invalid_buffer,
      [](const World&) {
        return Texts{"passes the end of its allocation", "only 8 bytes"};
      }));
  r.push_back(slices_row(
      "gather_slices_freed_memory",
      [](const World& w) {
        return DeviceSlice{0, w.freed[0], 16};
      },
      Errc::invalid_buffer,
      [](const World&) { return Texts{"gather_slices slice on device 0: pointer 0x"}; }));
  r.push_back({"gather_slices_output_too_small",
               [](World& w) {
                 const DeviceSlice slices[] = {{0, w.spare[0], 4096}, {0, w.buffer[0], 1}};
                 (void)w.xfer->gather_slices(slices, std::span(w.pageable).first(4096));
               },
               Errc::invalid_argument,
               [](const World&) {
                 return Texts{"gather_slices: the output holds 4096 bytes, the slices need 4097"};
               }});
  r.push_back({"gather_slices_pinned_output_too_small",
               [](World& w) {
                 const DeviceSlice slices[] = {{0, w.spare[0], 4096}};
                 (void)w.xfer->gather_slices(slices, w.pinned.first(4095));
               },
               Errc::invalid_argument, [](const World&) { return Texts{"the output holds 4095 bytes"}; }});

  // --- gather_to_device ---------------------------------------------------------------------------------
  r.push_back(
      {"gather_to_device_destination_index",
       [](World& w) { (void)w.xfer->gather_to_device(w.count, w.output[0], kAlloc); }, Errc::invalid_buffer,
       [](const World& w) { return index_texts("gather_to_device destination device", w.count, w.count); }});
  r.push_back({"gather_to_device_null_output",
               [](World& w) { (void)w.xfer->gather_to_device(0, nullptr, kAlloc); }, Errc::invalid_buffer,
               [](const World&) {
                 return Texts{"gather_to_device output on device 0", "is null"};
               }});
  r.push_back({"gather_to_device_pageable_output",
               [](World& w) { (void)w.xfer->gather_to_device(0, w.pageable.data(), kAlloc); },
               Errc::invalid_buffer,
               [](const World&) {
                 return Texts{"gather_to_device output on device 0", "is not memory CUDA knows"};
               }});
  r.push_back({"gather_to_device_pinned_output",
               [](World& w) { (void)w.xfer->gather_to_device(0, w.pinned.data(), 4096); },
               Errc::invalid_buffer,
               [](const World&) { return Texts{"is pinned host memory, not device memory"}; }});
  r.push_back({"gather_to_device_freed_output",
               [](World& w) { (void)w.xfer->gather_to_device(0, w.freed[0], 4096); }, Errc::invalid_buffer,
               [](const World&) { return Texts{"gather_to_device output on device 0: pointer 0x"}; }});
  r.push_back({"gather_to_device_capacity_past_the_allocation",
               [](World& w) { (void)w.xfer->gather_to_device(0, w.output[0], kAlloc * w.count + 1); },
               Errc::invalid_buffer, [](const World&) { return Texts{"passes the end of its allocation"}; }});
  r.push_back({"gather_to_device_capacity_too_small",
               [](World& w) { (void)w.xfer->gather_to_device(0, w.output[0], w.total() - 1); },
               Errc::invalid_argument,
               [](const World& w) {
                 return Texts{"gather_to_device: the output on device 0 holds " + n(w.total() - 1) +
                              " bytes, the registered buffers need " + n(w.total())};
               }});
  r.push_back(
      {"gather_to_device_capacity_zero", [](World& w) { (void)w.xfer->gather_to_device(0, w.output[0], 0); },
       Errc::invalid_argument,
       [](const World& w) { return Texts{"holds 0 bytes, the registered buffers need " + n(w.total())}; }});
  r.push_back({"gather_to_device_freed_source",
               [](World& w) { (void)w.xfer->gather_to_device(0, w.output[0], kAlloc * w.count); },
               Errc::invalid_buffer,
               [](const World& w) {
                 return Texts{"registered on device " + n(w.last()), "freed or reallocated"};
               },
               [](World& w) { w.register_freed(w.last(), kMiB); }});

  // --- MultiGpuManager and its pool ---------------------------------------------------------------------
  r.push_back({"manager_device_index", [](World& w) { (void)w.manager->device(w.count); },
               Errc::invalid_buffer, [](const World& w) { return index_texts("device", w.count, w.count); }});
  r.push_back({"manager_link_destination_index", [](World& w) { (void)w.manager->link(0, w.count); },
               Errc::invalid_buffer,
               [](const World& w) { return index_texts("destination device", w.count, w.count); }});
  r.push_back({"manager_link_source_index", [](World& w) { (void)w.manager->link(w.count, 0); },
               Errc::invalid_buffer,
               [](const World& w) { return index_texts("source device", w.count, w.count); }});
  r.push_back({"manager_peer_enabled_destination_index",
               [](World& w) { (void)w.manager->peer_enabled(0, w.count); }, Errc::invalid_buffer,
               [](const World& w) { return index_texts("destination device", w.count, w.count); }});
  r.push_back({"manager_create_unknown_ordinal",
               [](World& w) {
                 Options opts;
                 opts.devices = {0, static_cast<int>(w.count)};
                 (void)MultiGpuManager::create(opts);
               },
               Errc::invalid_option,
               [](const World& w) {
                 return Texts{"Options::devices names CUDA ordinal " + n(w.count),
                              "only " + n(w.count) + " devices are visible"};
               }});
  r.push_back({"manager_create_more_devices_than_visible",
               [](World& w) {
                 Options opts;
                 opts.min_devices = static_cast<int>(w.count) + 1;
                 (void)MultiGpuManager::create(opts);
               },
               Errc::no_device,
               [](const World& w) {
                 return Texts{"found " + n(w.count) + " usable CUDA device(s), need at least " +
                              n(w.count + 1)};
               }});
  r.push_back(
      {"pool_acquire_above_the_limit",
       [](World& w) { (void)w.manager->pinned_pool().acquire(w.manager->options().pool_limit_bytes + 1); },
       Errc::out_of_memory,
       [](const World& w) {
         return Texts{"pinned pool limit of " + n(w.manager->options().pool_limit_bytes) + " bytes"};
       }});
  return r;
}

// Rows that need two devices: memory and streams of the wrong device, sizes that differ between devices,
// paths that need peer access.
std::vector<Row> multi_rows() {
  std::vector<Row> r;
  auto peer_off = [](Options& o) { o.enable_peer_access = false; };
  r.push_back({"set_device_buffer_memory_of_another_device",
               [](World& w) { w.xfer->set_device_buffer(0, w.spare[1], 16); }, Errc::invalid_buffer,
               [](const World& w) {
                 return Texts{"set_device_buffer on device 0",
                              "belongs to CUDA ordinal " + n(w.ordinal[1]) + ", not " + n(w.ordinal[0])};
               }});
  r.push_back({"set_device_buffer_producer_stream_of_another_device",
               [](World& w) { w.xfer->set_device_buffer(0, w.spare[0], 16, w.stream[1]); }, Errc::cuda_error,
               [](const World&) {
                 return Texts{"set_device_buffer", "device 0", "is the stream of another device?"};
               }});
  for (const auto& [path, label] :
       {std::pair{CopyPath::automatic, "automatic"}, std::pair{CopyPath::peer, "peer"},
        std::pair{CopyPath::staged, "staged"}}) {
    const std::string p = label;
    r.push_back({"copy_device_buffer_" + p + "_source_larger_than_the_destination",
                 [path](World& w) { w.xfer->copy_device_buffer(1, 0, path); }, Errc::invalid_argument,
                 [](const World& w) {
                   return Texts{"copy_device_buffer: " + n(w.size[1]) + " bytes do not fit the buffer of " +
                                n(w.size[0]) + " bytes registered on device 0"};
                 }});
    r.push_back({"copy_device_buffer_async_" + p + "_source_larger_than_the_destination",
                 [path](World& w) { (void)w.xfer->copy_device_buffer_async(1, 0, path); },
                 Errc::invalid_argument,
                 [](const World& w) { return Texts{n(w.size[1]) + " bytes do not fit"}; }});
    r.push_back(
        {"copy_device_buffer_" + p + "_source_without_buffer",
         [path](World& w) { w.xfer->copy_device_buffer(1, 0, path); }, Errc::invalid_buffer,
         [](const World&) { return Texts{"copy_device_buffer source: no buffer is registered on device 1"}; },
         [](World& w) { w.xfer->clear_device_buffer(1); }});
    r.push_back({"copy_device_buffer_" + p + "_destination_without_buffer",
                 [path](World& w) { w.xfer->copy_device_buffer(0, 1, path); }, Errc::invalid_buffer,
                 [](const World&) {
                   return Texts{"copy_device_buffer destination: no buffer is registered on device 1"};
                 },
                 [](World& w) { w.xfer->clear_device_buffer(1); }});
    r.push_back({"copy_device_buffer_" + p + "_freed_source",
                 [path](World& w) { w.xfer->copy_device_buffer(1, 0, path); }, Errc::invalid_buffer,
                 [](const World&) {
                   return Texts{"registered on device 1", "freed or reallocated"};
                 },
                 [](World& w) { w.register_freed(1, kRegistered); }});
    r.push_back({"copy_device_buffer_" + p + "_freed_destination",
                 [path](World& w) { w.xfer->copy_device_buffer(0, 1, path); }, Errc::invalid_buffer,
                 [](const World&) {
                   return Texts{"registered on device 1", "freed or reallocated"};
                 },
                 [](World& w) { w.register_freed(1, kMiB); }});
  }
  r.push_back(
      {"copy_device_buffer_peer_without_peer_access",
       [](World& w) { w.xfer->copy_device_buffer(0, 1, CopyPath::peer); },
       Errc::unsupported,
       [](const World&) {
         return Texts{"copy_device_buffer: no peer access between device 0 and device 1", "peer access off"};
       },
       {},
       peer_off});
  r.push_back({"copy_device_buffer_async_peer_without_peer_access",
               [](World& w) { (void)w.xfer->copy_device_buffer_async(0, 1, CopyPath::peer); },
               Errc::unsupported,
               [](const World&) { return Texts{"no peer access between device 0 and device 1"}; },
               {},
               peer_off});
  r.push_back({"copy_buffer_source_index_with_a_valid_destination",
               [](World& w) { w.xfer->copy_buffer(w.count, 1, w.data(16)); }, Errc::invalid_buffer,
               [](const World& w) { return index_texts("copy_buffer source device", w.count, w.count); }});
  r.push_back({"copy_buffer_into_a_device_without_buffer",
               [](World& w) { w.xfer->copy_buffer(0, 1, w.data(16)); }, Errc::invalid_buffer,
               [](const World&) { return Texts{"copy_buffer: no buffer is registered on device 1"}; },
               [](World& w) { w.xfer->clear_device_buffer(1); }});
  r.push_back({"broadcast_scatter_allgather_without_peer_access",
               [](World& w) { w.xfer->broadcast(w.data(4096), HostBroadcastPath::scatter_allgather); },
               Errc::unsupported,
               [](const World&) {
                 return Texts{"broadcast: scatter_allgather needs peer access between every pair"};
               },
               {},
               peer_off});
  r.push_back({"broadcast_data_larger_than_the_second_buffer",
               [](World& w) { w.xfer->broadcast(w.data(w.size[0])); }, Errc::invalid_argument,
               [](const World&) { return Texts{"bytes registered on device 1"}; },
               [](World& w) { w.xfer->set_device_buffer(1, w.buffer[1], w.size[0] - 1); }});
  for (const auto& [path, label] :
       {std::pair{DeviceBroadcastPath::automatic, "automatic"}, std::pair{DeviceBroadcastPath::nccl, "nccl"},
        std::pair{DeviceBroadcastPath::peer, "peer"}}) {
    const std::string p = label;
    r.push_back({"broadcast_from_device_" + p + "_root_larger_than_a_buffer",
                 [path](World& w) { w.xfer->broadcast_from_device(1, path); }, Errc::invalid_argument,
                 [](const World& w) {
                   return Texts{"broadcast_from_device: the root's " + n(w.size[1]) +
                                " bytes do not fit the buffer of " + n(w.size[0]) +
                                " bytes registered on device 0"};
                 }});
    r.push_back({"broadcast_from_device_" + p + "_freed_destination",
                 [path](World& w) { w.xfer->broadcast_from_device(0, path); }, Errc::invalid_buffer,
                 [](const World&) {
                   return Texts{"registered on device 1", "freed or reallocated"};
                 },
                 [](World& w) { w.register_freed(1, kMiB); }});
  }
  r.push_back(
      {"gather_into_output_too_small_with_a_skip",
       [](World& w) { (void)w.xfer->gather_into(std::span(w.pageable).first(w.total() - w.size[0] - 1), 0); },
       Errc::invalid_argument,
       [](const World& w) {
         return Texts{"the output holds " + n(w.total() - w.size[0] - 1) +
                      " bytes, the registered buffers need " + n(w.total() - w.size[0])};
       }});
  r.push_back({"gather_blocking_freed_source", [](World& w) { (void)w.xfer->gather_blocking(1); },
               Errc::invalid_buffer,
               [](const World&) {
                 return Texts{"registered on device 0", "freed or reallocated"};
               },
               [](World& w) { w.register_freed(0, kMiB); }});
  r.push_back({"gather_freed_source", [](World& w) { (void)w.xfer->gather(1); }, Errc::invalid_buffer,
               [](const World&) {
                 return Texts{"registered on device 0", "freed or reallocated"};
               },
               [](World& w) { w.register_freed(0, kMiB); }});
  r.push_back(
      {"gather_slices_memory_of_another_device",
       [](World& w) {
         const DeviceSlice slices[] = {{0, w.spare[1], 16}};
         (void)w.xfer->gather_slices(slices, w.pageable);
       },
       Errc::invalid_buffer,
       [](const World& w) {
         return Texts{"gather_slices slice on device 0", "belongs to CUDA ordinal " + n(w.ordinal[1])};
       }});
  r.push_back(
      {"gather_to_device_output_on_another_device",
       [](World& w) { (void)w.xfer->gather_to_device(0, w.output[1], kAlloc); }, Errc::invalid_buffer,
       [](const World& w) {
         return Texts{"gather_to_device output on device 0", "belongs to CUDA ordinal " + n(w.ordinal[1])};
       }});
  return r;
}

// Zero sizes that are allowed: nothing is written, nothing thrown, nothing changes.
std::vector<Row> zero_rows() {
  std::vector<Row> r;
  auto all_zero = [](World& w) {
    for (std::size_t i = 0; i < w.count; ++i) w.xfer->set_device_buffer(i, w.buffer[i], 0);
  };
  r.push_back({"copy_buffer_empty_data", [](World& w) { w.xfer->copy_buffer(0, 0, {}); }, std::nullopt});
  r.push_back({"copy_buffer_empty_pinned_data",
               [](World& w) { w.xfer->copy_buffer(0, 0, w.pinned.first(0)); }, std::nullopt});
  for (const auto path : {HostBroadcastPath::automatic, HostBroadcastPath::per_device}) {
    r.push_back({std::string("broadcast_empty_data_") +
                     (path == HostBroadcastPath::automatic ? "automatic" : "per_device"),
                 [path](World& w) { w.xfer->broadcast({}, path); }, std::nullopt});
  }
  r.push_back({"broadcast_from_device_of_an_empty_root",
               [](World& w) { w.xfer->broadcast_from_device(0); },
               std::nullopt,
               {},
               [](World& w) { w.xfer->set_device_buffer(0, w.buffer[0], 0); }});
  r.push_back(
      {"gather_slices_of_no_slices", [](World& w) { (void)w.xfer->gather_slices({}, {}); }, std::nullopt});
  r.push_back({"gather_slices_of_empty_null_slices",
               [](World& w) {
                 const DeviceSlice slices[] = {{0, nullptr, 0}, {w.last(), nullptr, 0}};
                 if (w.xfer->gather_slices(slices, {}) != 0)
                   throw std::runtime_error("gather_slices wrote bytes");
               },
               std::nullopt});
  r.push_back({"gather_into_empty_output_of_empty_buffers",
               [](World& w) {
                 for (const GatherPiece& p : w.xfer->gather_into({})) {
                   if (p.size != 0) throw std::runtime_error("a non-empty piece");
                 }
               },
               std::nullopt,
               {},
               all_zero});
  r.push_back({"gather_to_device_capacity_zero_of_empty_buffers",
               [](World& w) { (void)w.xfer->gather_to_device(0, w.output[0], 0); },
               std::nullopt,
               {},
               all_zero});
  r.push_back({"gather_all_of_empty_buffers",
               [](World& w) {
                 for (const HostBuffer& b : w.xfer->gather_all()) {
                   if (!b.empty()) throw std::runtime_error("a non-empty result");
                 }
               },
               std::nullopt,
               {},
               all_zero});
  return r;
}

// --- the fixture ------------------------------------------------------------------------------------------

template <class Base>
class BadInputTest : public Base, public ::testing::WithParamInterface<Row> {
 protected:
  [[nodiscard]] Options options() const override {
    Options opts = Base::options();
    if (this->GetParam().options) this->GetParam().options(opts);
    return opts;
  }

  void SetUp() override {
    Base::SetUp();
    if (this->IsSkipped()) return;
    World& w = world_;
    w.manager = &this->manager();
    w.xfer = &this->xfer();
    w.count = this->device_count();
    for (std::size_t i = 0; i < w.count; ++i) {
      w.ordinal.push_back(this->ordinal(i));
      DeviceMemory& buffer = this->allocate(i, kAlloc);
      w.size.push_back(kRegistered + 4096 * i);
      fill_device(buffer.ordinal(), buffer.get(), w.size[i], this->seed(i));
      this->xfer().set_device_buffer(i, buffer.get(), w.size[i]);
      w.buffer.push_back(buffer.get());
      w.spare.push_back(this->allocate(i, kAlloc).get());
      w.output.push_back(this->allocate(i, kAlloc * w.count).get());
      streams_.push_back(std::make_unique<Stream>(this->ordinal(i)));
      w.stream.push_back(streams_.back()->get());
    }
    pinned_ = std::make_unique<PinnedMemory>(kMiB);
    w.pinned = pinned_->span();
    // A warm pool: an operation that leases and leaks, or allocates before checking, changes its counts.
    { const auto warm_up = this->xfer().gather_all(); }
    w.register_freed = [this](std::size_t device, std::size_t bytes) {
      DeviceMemory& stale = this->allocate(device, bytes);
      this->xfer().set_device_buffer(device, stale.get(), bytes);
      stale.free_now();
    };
    // Freed last: no later allocation of the test can reuse these addresses (register_freed frees what
    // it allocates, and no row uses both).
    for (std::size_t i = 0; i < w.count; ++i) {
      DeviceMemory& freed = this->allocate(i, kAlloc);
      w.freed.push_back(freed.get());
      freed.free_now();
    }
  }

  void check_row() {
    const Row& row = this->GetParam();
    World& w = world_;
    if (row.setup) row.setup(w);
    std::vector<std::optional<RegisteredBuffer>> registry;
    for (std::size_t i = 0; i < w.count; ++i) registry.push_back(this->xfer().device_buffer(i));
    const PoolStats pool = this->manager().pinned_pool().stats();

    if (row.code) {
      EXPECT_TRUE(throws(row, *row.code, row.texts ? row.texts(w) : Texts{}));
    } else {
      EXPECT_NO_THROW(row.call(w)) << row.name << " must be accepted";
    }

    for (std::size_t i = 0; i < w.count; ++i) {
      const auto now = this->xfer().device_buffer(i);
      ASSERT_EQ(now.has_value(), registry[i].has_value()) << "registration of device " << i;
      if (now) {
        EXPECT_EQ(now->ptr, registry[i]->ptr) << "registered pointer of device " << i;
        EXPECT_EQ(now->size, registry[i]->size) << "registered size of device " << i;
      }
      // The buffers the fixture registered hold their bytes, whatever the row did to the registry.
      EXPECT_TRUE(device_matches(w.ordinal[i], w.buffer[i], w.size[i], this->seed(i), 0,
                                 "buffer of device " + std::to_string(i) + " after " + row.name));
    }
    const PoolStats after = this->manager().pinned_pool().stats();
    EXPECT_EQ(after.in_use, pool.in_use) << "pinned bytes in use";
    EXPECT_EQ(after.cached + after.pending, pool.cached + pool.pending) << "pinned bytes cached + pending";
    EXPECT_EQ(after.allocations, pool.allocations) << "pinned allocations";
  }

  ::testing::AssertionResult throws(const Row& row, Errc code, const Texts& texts) {
    try {
      row.call(world_);
    } catch (const Error& e) {
      if (e.code() != code) {
        return ::testing::AssertionFailure() << row.name << ": threw Errc::" << to_string(e.code())
                                             << " instead of Errc::" << to_string(code) << ": " << e.what();
      }
      for (const std::string& text : texts) {
        if (std::string(e.what()).find(text) == std::string::npos) {
          return ::testing::AssertionFailure()
                 << row.name << ": message does not contain '" << text << "': " << e.what();
        }
      }
      return ::testing::AssertionSuccess();
    } catch (const std::exception& e) {
      return ::testing::AssertionFailure() << row.name << ": threw a non-gpuxfer exception: " << e.what();
    }
    return ::testing::AssertionFailure()
           << row.name << ": did not throw (expected Errc::" << to_string(code) << ")";
  }

  World world_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::unique_ptr<PinnedMemory> pinned_;
};

std::string row_name(const ::testing::TestParamInfo<Row>& info) { return info.param.name; }

using GpuBadInput = BadInputTest<GpuTest>;
using MultiGpuBadInput = BadInputTest<MultiGpuTest>;
using GpuZeroSizes = BadInputTest<GpuTest>;

TEST_P(GpuBadInput, IsRejectedAndChangesNothing) { check_row(); }
TEST_P(MultiGpuBadInput, IsRejectedAndChangesNothing) { check_row(); }
TEST_P(GpuZeroSizes, IsAcceptedAndChangesNothing) { check_row(); }

INSTANTIATE_TEST_SUITE_P(Rows, GpuBadInput, ::testing::ValuesIn(single_rows()), row_name);
INSTANTIATE_TEST_SUITE_P(Rows, MultiGpuBadInput, ::testing::ValuesIn(multi_rows()), row_name);
INSTANTIATE_TEST_SUITE_P(Rows, GpuZeroSizes, ::testing::ValuesIn(zero_rows()), row_name);

}  // namespace
}  // namespace gpuxfer::test
