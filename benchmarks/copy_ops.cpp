// copy_device_buffer from device 0 to device 1, over peer access and forced through the host, and its
// stream-ordered form over peer access.
#include "ops.hpp"
#include "raw_copies.hpp"

namespace gpuxfer::bench {
namespace {

// copy_device_buffer(0, 1, path); @p stream_ordered: its form on device 0's bench stream, then that stream
// synchronised.
Case copy_case(Bench& b, std::size_t size, CopyPath path, bool stream_ordered = false) {
  return {.prepare =
              [&b, size](std::uint64_t run) {
                b.fill_device(0, b.src(0), size, Bench::seed(run, 0));
                b.poison_device(1, b.dst(1), size);
                b.register_buffer(0, b.src(0), size);
                b.register_buffer(1, b.dst(1), size);
                b.synchronize();
              },
          .work =
              [&b, path, stream_ordered] {
                if (!stream_ordered) return b.xfer().copy_device_buffer(0, 1, path);
                static_cast<void>(b.xfer().copy_device_buffer_async(0, 1, b.stream(0), path));
                cuda_check(cudaStreamSynchronize(b.stream(0)),
                           "copy_device_buffer_async: the caller's stream");
              },
          .check =
              [&b, size](std::uint64_t run) {
                return b.check_device(1, b.dst(1), size, Bench::seed(run, 0));  // device 0's pattern
              }};
}

// An operation of @p run's copy from device 0 to 1, against @p ceiling.
OpSpec copy_op(const char* name, std::string what, std::vector<std::string> ceiling,
               std::optional<std::string> (*waive)(Bench&),
               std::function<std::optional<Stats>(Bench&, std::size_t)> run, double target) {
  return {.name = name,
          .what = std::move(what),
          .bytes = {"size", bytes_payload},
          .ceiling = std::move(ceiling),
          .waive = waive,
          .run = std::move(run),
          .target = target};
}

// copy_device_buffer(0, 1, path), measured alone against the raw copies of that path.
std::function<std::optional<Stats>(Bench&, std::size_t)> blocking(CopyPath path) {
  return [path](Bench& b, std::size_t size) { return b.measure(copy_case(b, size, path)); };
}

}  // namespace

std::vector<OpSpec> copy_ops() {
  return {
      copy_op("copy_peer", "copy_device_buffer(0, 1, CopyPath::peer) (steady_clock)", {"ceiling_peer"},
              needs_peer_access, blocking(CopyPath::peer), 0.95),
      copy_op(
          "copy_staged",
          "copy_device_buffer(0, 1, CopyPath::staged): chunked through pinned host memory (steady_clock); "
          "ceiling min(D2H of device 0, H2D of the last device)",
          {"ceiling_d2h_one", "ceiling_h2d_one"}, needs_two_devices, blocking(CopyPath::staged), 0.90),
      copy_op(
          "copy_peer_stream",
          "copy_device_buffer_async(0, 1, stream, CopyPath::peer) + cudaStreamSynchronize: the "
          "stream-ordered form against copy_peer's blocking call (steady_clock)",
          {"copy_peer"}, needs_peer_access,
          [](Bench& b, std::size_t size) {  // interleaved with copy_peer's blocking call
            return measure_against(b, copy_case(b, size, CopyPath::peer),
                                   copy_case(b, size, CopyPath::peer, true));
          },
          stream_form_target),
  };
}

}  // namespace gpuxfer::bench
