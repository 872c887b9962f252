// The operations the bench knows: what each times, how its bytes are counted, what its ceiling is, when
// it cannot run, and its target from issue 3. Each family of operations lives in its own file.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench.hpp"
#include "timing.hpp"

namespace gpuxfer::bench {

/// What an operation's numbers are: a ceiling (raw CUDA/NCCL/memcpy, the best the hardware gives), one
/// of gpuxfer's operations, the seed's naive way, or another baseline users would write.
enum class Kind { ceiling, gpuxfer, naive, baseline };

/// Where an operation's raw ceiling bounds it, so that a ratio above 1.03 is a measurement error: always,
/// never (a reference to beat, such as ncclBroadcast), or with one device only (a host broadcast loads
/// every device's link, each as fast as the one ceiling).
enum class Bounded { always, never, one_device };

[[nodiscard]] const char* to_string(Kind kind) noexcept;

/// How an operation's bytes are counted: in words, and for GB/s at per-device size @p size with
/// @p devices devices.
struct ByteRule {
  std::string text{};
  std::size_t (*count)(std::size_t size, std::size_t devices) = nullptr;
};

struct OpSpec {
  std::string name{};
  Kind kind = Kind::gpuxfer;
  /// One line: what one sample times.
  std::string what{};
  /// How bytes are counted ("size x devices").
  ByteRule bytes{};
  /// Operations whose GB/s at the same size is the ceiling (the lowest of them); empty: none.
  std::vector<std::string> ceiling{};
  /// Where a raw ceiling bounds the operation.
  Bounded bounded = Bounded::always;
  /// A further limit shown beside the ratio (not in it): the host memcpy rate for pageable paths.
  std::string bound{};
  /// The same limit with the library's streaming-store host copy (what the host can do, not libc).
  std::string stream_bound{};
  /// The same host copy while the path's links run (ceiling_host_stream_under_h2d, the pageable
  /// broadcast's): the most its staging ring can reach on this host. Empty: none.
  std::string overlap_bound{};
  /// Runs at this size only (latency probes, small buffers); 0: at every size of the run.
  std::size_t fixed_size = 0;
  /// Why the operation cannot run on this machine, or nullopt; none: it always can.
  std::function<std::optional<std::string>(Bench&)> waive{};
  /// Measures the operation at per-device @p size; nullopt when it cannot run (see waived_note).
  std::function<std::optional<Stats>(Bench&, std::size_t size)> run{};
  /// Why, when run() returns nullopt.
  std::string waived_note{};
  /// Issue 3's target for ratio = GB/s / ceiling GB/s at the headline size (>=), if any.
  std::optional<double> target{};
  /// The target instead when one device is under test, where that differs (a broadcast cannot beat the
  /// one link there).
  std::optional<double> one_device_target{};
  /// The headline shows time / ceiling time (a latency, which must stay <= target) instead of the ratio.
  bool time_target = false;
};

/// Issue 10's target for a stream-ordered form against its blocking call (its ceiling, interleaved with it).
inline constexpr double stream_form_target = 0.98;

/// Byte counting rules.
[[nodiscard]] std::size_t bytes_all_devices(std::size_t size, std::size_t devices);  // size x devices
[[nodiscard]] std::size_t bytes_payload(std::size_t size, std::size_t devices);      // size

/// Waivers shared by the families.
[[nodiscard]] std::optional<std::string> needs_two_devices(Bench& b);
[[nodiscard]] std::optional<std::string> needs_peer_access(Bench& b);
[[nodiscard]] std::optional<std::string> needs_nccl(Bench& b);

/// The families, each in its file, in the order they run.
/// Every hardware thread (at least 1): the thread count of the widest host copy ceiling.
[[nodiscard]] std::size_t all_cores();
/// The streaming-store host copy ceiling on every core (ceilings.cpp): the stream_bound of pageable paths.
[[nodiscard]] std::string stream_bound_op();

[[nodiscard]] std::vector<OpSpec> ceiling_ops();       // ceilings.cpp
[[nodiscard]] std::vector<OpSpec> gather_ops();        // gather_ops.cpp
[[nodiscard]] std::vector<OpSpec> copy_ops();          // copy_ops.cpp
[[nodiscard]] std::vector<OpSpec> broadcast_ops();     // broadcast_ops.cpp
[[nodiscard]] std::vector<OpSpec> small_gather_ops();  // small_gather.cpp
[[nodiscard]] std::vector<OpSpec> block_ops();         // blocks_ops.cpp

/// Every operation, in run order: every ceiling comes before the operations measured against it.
[[nodiscard]] const std::vector<OpSpec>& all_ops();

/// The operations named in @p names (a name ending in '*' names every operation it starts) plus, recursively, their ceilings, in run order; all of them when
/// @p names is empty. @throws Error(Errc::invalid_option) naming an unknown operation and the known ones
[[nodiscard]] std::vector<const OpSpec*> select_ops(const std::vector<std::string>& names);

}  // namespace gpuxfer::bench
