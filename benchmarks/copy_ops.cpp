// copy_device_buffer from device 0 to device 1, over peer access and forced through the host.
#include "ops.hpp"

namespace gpuxfer::bench {
namespace {

std::optional<Stats> copy(Bench& b, std::size_t size, CopyPath path) {
  return b.measure([&](std::uint64_t run) -> std::optional<Sample> {
    b.fill_device(0, b.src(0), size, Bench::seed(run, 0));
    b.poison_device(1, b.dst(1), size);
    b.register_buffer(0, b.src(0), size);
    b.register_buffer(1, b.dst(1), size);
    b.synchronize();
    Sample s;
    s.seconds = host_seconds([&] { b.xfer().copy_device_buffer(0, 1, path); });
    s.wrong = b.check_device(1, b.dst(1), size, Bench::seed(run, 0));
    return s;
  });
}

std::optional<Stats> copy_peer(Bench& b, std::size_t size) { return copy(b, size, CopyPath::peer); }
std::optional<Stats> copy_staged(Bench& b, std::size_t size) { return copy(b, size, CopyPath::staged); }

}  // namespace

std::vector<OpSpec> copy_ops() {
  return {
      {.name = "copy_peer",
       .kind = Kind::gpuxfer,
       .what = "copy_device_buffer(0, 1, CopyPath::peer) (steady_clock)",
       .bytes_rule = "size",
       .bytes = bytes_payload,
       .ceiling = {"ceiling_peer"},
       .waive = needs_peer_access,
       .run = copy_peer,
       .target = 0.95},
      {.name = "copy_staged",
       .kind = Kind::gpuxfer,
       .what =
           "copy_device_buffer(0, 1, CopyPath::staged): chunked through pinned host memory (steady_clock); "
           "ceiling min(D2H of device 0, H2D of the last device)",
       .bytes_rule = "size",
       .bytes = bytes_payload,
       .ceiling = {"ceiling_d2h_one", "ceiling_h2d_one"},
       .waive = needs_two_devices,
       .run = copy_staged,
       .target = 0.90},
  };
}

}  // namespace gpuxfer::bench
