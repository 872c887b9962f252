// copy_device_buffer from device 0 to device 1, over peer access and forced through the host.
#include "ops.hpp"

namespace gpuxfer::bench {
namespace {

std::optional<Stats> copy(Bench& b, std::size_t size, CopyPath path) {
  return b.measure(
      {.prepare =
           [&](std::uint64_t run) {
             b.fill_device(0, b.src(0), size, Bench::seed(run, 0));
             b.poison_device(1, b.dst(1), size);
             b.register_buffer(0, b.src(0), size);
             b.register_buffer(1, b.dst(1), size);
             b.synchronize();
           },
       .work = [&] { b.xfer().copy_device_buffer(0, 1, path); },
       .check = [&](std::uint64_t run) { return b.check_device(1, b.dst(1), size, Bench::seed(run, 0)); }});
}

// copy_device_buffer(0, 1, path) against the raw copies of that path.
OpSpec copy_op(const char* name, CopyPath path, std::string what, std::vector<std::string> ceiling,
               std::optional<std::string> (*waive)(Bench&), double target) {
  return {.name = name,
          .what = std::move(what),
          .bytes = {"size", bytes_payload},
          .ceiling = std::move(ceiling),
          .waive = waive,
          .run = [path](Bench& b, std::size_t size) { return copy(b, size, path); },
          .target = target};
}

}  // namespace

std::vector<OpSpec> copy_ops() {
  return {
      copy_op("copy_peer", CopyPath::peer, "copy_device_buffer(0, 1, CopyPath::peer) (steady_clock)",
              {"ceiling_peer"}, needs_peer_access, 0.95),
      copy_op(
          "copy_staged", CopyPath::staged,
          "copy_device_buffer(0, 1, CopyPath::staged): chunked through pinned host memory (steady_clock); "
          "ceiling min(D2H of device 0, H2D of the last device)",
          {"ceiling_d2h_one", "ceiling_h2d_one"}, needs_two_devices, 0.90),
  };
}

}  // namespace gpuxfer::bench
