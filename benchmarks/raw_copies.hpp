// Raw copies, the bench's baselines: a list of cudaMemcpyAsync / cudaMemcpyPeerAsync calls on the bench's
// own streams, with what every sample does around them (pattern in, destination poisoned, data checked).
// The copy ceilings time them with events behind the spin gate; the latency probes with steady_clock
// around queueing them and waiting for an event per device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "bench.hpp"

namespace gpuxfer::bench {

/// The size of the latency probes, and their samples (more than --iters: they are cheap and noisy).
inline constexpr std::size_t latency_bytes = 4096;
inline constexpr int latency_iters = 200;
/// latency_gather_4k's rounds: latency_iters pairs (raw baseline, gather) in this many rounds. With 10
/// pairs a round its ratio moved by 9.5% between processes on one H100 (0.829 to 0.911); with 40, by 1.3%
/// over six.
inline constexpr int latency_rounds = 5;

/// Where a raw copy reads or writes: memory of device index `device`, or pinned host memory.
struct Place {
  std::byte* ptr = nullptr;
  std::optional<std::size_t> device{};  ///< nullopt: pinned host memory
};

/// One raw copy of @p bytes, queued on the bench stream of device index `stream`; its data is the
/// pattern Bench::seed(run, pattern) from offset 0.
struct RawCopy {
  Place from;
  Place to;
  std::size_t bytes = 0;
  std::size_t stream = 0;
  std::size_t pattern = 0;
};

/// Fills every source with its pattern, poisons every destination, waits.
void prepare_copies(Bench& b, const std::vector<RawCopy>& copies, std::uint64_t run);

/// Queues every copy on its stream (device to device: cudaMemcpyPeerAsync; else cudaMemcpyAsync; with
/// @p kernels, a device -> host copy of 16-byte vectors as the library's copy kernel, launch_copy),
/// switching devices only between streams of different devices; with @p record_done, records
/// done_event(d) after the last copy of each device d.
void enqueue_copies(Bench& b, const std::vector<RawCopy>& copies, bool record_done, bool kernels = false);

/// Whether enqueue_copies may queue @p c as a kernel: device -> host, 16-byte vectors on both sides.
[[nodiscard]] bool kernel_copy(const RawCopy& c);

/// Bytes of every destination that differ from its pattern. Blocks.
[[nodiscard]] std::size_t check_copies(Bench& b, const std::vector<RawCopy>& copies, std::uint64_t run);

/// The device indices whose streams carry @p copies, each once, in order.
[[nodiscard]] std::vector<std::size_t> stream_devices(const std::vector<RawCopy>& copies);

/// A ceiling's case: @p copies timed with events behind the spin gate.
[[nodiscard]] Case gated_copies(Bench& b, std::vector<RawCopy> copies);

/// A latency probe's case: steady_clock around queueing @p copies and waiting for an event per device
/// (latency_iters samples at least): the least a blocking call that makes these copies can cost.
[[nodiscard]] Case latency_case(Bench& b, std::vector<RawCopy> copies);

/// What @p queue queues on @p stream (a stream of the current device), captured in a CUDA graph and
/// instantiated; the graph is destroyed on a failure, @p what names the failing step.
[[nodiscard]] std::shared_ptr<CUgraphExec_st> capture_graph(cudaStream_t stream,
                                                            const std::function<void()>& queue,
                                                            const char* what);

/// A graph latency probe's case: @p copies captured once in a CUDA graph (forked from device 0's stream
/// to every other device's and joined back), a sample being steady_clock around its launch and a
/// synchronise of device 0's stream: the least a replayed graph that makes these copies can cost. The
/// copies are memcpy nodes, or kernel nodes where they can be (device -> host, 16-byte vectors) and that
/// graph replayed sooner (the fastest of 20 replays each, when the case is made).
[[nodiscard]] Case graph_latency_case(Bench& b, std::vector<RawCopy> copies);

/// The rounds of a bandwidth measured interleaved with its ceiling (measure_against).
inline constexpr int ceiling_rounds = 3;

/// @p c interleaved with @p ceiling, the case its row is measured against, sample by sample:
/// ceiling_rounds rounds of --iters pairs; the least disturbed round (bench::measure_interleaved) is
/// reported, the ceiling's median in it the row's ceiling (Report::add). Measured apart, the host's
/// memory swung between the ceiling's samples and the operation's: a pinned broadcast read 0.917 x its
/// ceiling in one run on the one-GPU runner and 0.987 x in the next process. Under --ranks, where such an
/// operation is a reference of the cross-process ones, which are measured alone, so is it: b.measure(c).
[[nodiscard]] std::optional<Stats> measure_against(Bench& b, const Case& ceiling, const Case& c);

/// measure_against the raw copies @p ceiling, timed as their ceiling row is (events behind the spin gate).
[[nodiscard]] std::optional<Stats> measure_with_ceiling(Bench& b, std::vector<RawCopy> ceiling,
                                                        const Case& c);

/// src(d) of every device in @p devices into its slice k of host_pinned() (k: its place in the list).
[[nodiscard]] std::vector<RawCopy> d2h_copies(Bench& b, const std::vector<std::size_t>& devices,
                                              std::size_t size);

/// Slice k of host_pinned() into dst(d) of every device d in @p devices.
[[nodiscard]] std::vector<RawCopy> h2d_copies(Bench& b, const std::vector<std::size_t>& devices,
                                              std::size_t size);

}  // namespace gpuxfer::bench
