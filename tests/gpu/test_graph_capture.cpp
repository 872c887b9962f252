// CUDA graph capture of the stream-ordered forms: a graph captured once and replayed many times, with a
// producer kernel writing a new seed before each replay; every replay verified byte for byte. What needs
// the host (pageable memory, the pinned pool) refuses with Errc::unsupported and leaves the capture intact.
// Small gathers are captured as kernel nodes, larger ones as memcpy nodes.
// Operations on another thread, while a stream captures in global mode, neither fail nor invalidate it.
#include "gpu/fixture.hpp"

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/expect_error.hpp"

namespace gpuxfer::test {
namespace {

constexpr std::size_t kBytes = 4 * kMiB + 13;
constexpr int kReplays = 100;

// A captured graph, instantiated; destroyed with its executable.
class Graph {
 public:
  Graph() = default;
  ~Graph() {
    if (exec_ != nullptr) static_cast<void>(cudaGraphExecDestroy(exec_));
    if (graph_ != nullptr) static_cast<void>(cudaGraphDestroy(graph_));
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  void begin(cudaStream_t stream, cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal) {
    cuda_check(cudaStreamBeginCapture(stream, mode), "begin capture");
  }
  void end(cudaStream_t stream) {
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph_);
    if (ended != cudaSuccess) static_cast<void>(cudaGetLastError());  // leave no error to later tests
    cuda_check(ended, "end capture");
    cuda_check(cudaGraphInstantiate(&exec_, graph_, 0), "instantiate");
  }
  /// Captures what @p body queues on @p stream; a throw ends the capture first, so no stream is left
  /// capturing.
  template <class Body>
  void capture(cudaStream_t stream, Body&& body,
               cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal) {
    begin(stream, mode);
    try {
      body();
    } catch (...) {
      cudaGraph_t g = nullptr;
      static_cast<void>(cudaStreamEndCapture(stream, &g));
      if (g != nullptr) static_cast<void>(cudaGraphDestroy(g));
      static_cast<void>(cudaGetLastError());
      throw;
    }
    end(stream);
  }
  /// Ends the capture on @p stream without instantiating (a graph is not instantiated while another
  /// capture of this thread is under way: cudaErrorStreamCaptureUnsupported).
  void abandon(cudaStream_t stream) {
    cuda_check(cudaStreamEndCapture(stream, &graph_), "end capture");
  }
  void launch(cudaStream_t stream) const { cuda_check(cudaGraphLaunch(exec_, stream), "graph launch"); }
  /// How many nodes of @p type the captured graph holds.
  [[nodiscard]] std::size_t nodes(cudaGraphNodeType type) const {
    std::size_t count = 0;
    cuda_check(cudaGraphGetNodes(graph_, nullptr, &count), "graph nodes");
    std::vector<cudaGraphNode_t> all(count);
    cuda_check(cudaGraphGetNodes(graph_, all.data(), &count), "graph nodes");
    std::size_t of_type = 0;
    for (cudaGraphNode_t node : all) {
      cudaGraphNodeType t{};
      cuda_check(cudaGraphNodeGetType(node, &t), "graph node type");
      of_type += t == type ? 1 : 0;
    }
    return of_type;
  }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// The producer of a replay: writes pattern @p produced + i into device i's buffer, device 0's on the
// graph's @p stream (so ordered before the replay), the others' on their legacy streams, waited for.
void produce(const std::vector<DeviceMemory*>& memory, cudaStream_t stream, std::uint64_t produced) {
  for (std::size_t i = 0; i < memory.size(); ++i) {
    const DeviceGuard guard(memory[i]->ordinal());
    pattern::fill_device(memory[i]->get(), memory[i]->size(), produced + i, 0,
                         i == 0 ? stream : cudaStreamLegacy);
    if (i != 0) cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "producer");
  }
}

using GpuCapture = GpuTest;

// gather into pinned memory, a broadcast from pinned memory, gather again: captured once, replayed 100
// times; before each replay a producer kernel writes seed r into the buffer and the host writes seed
// 1000 + r into the broadcast's source.
TEST_F(GpuCapture, AGraphOfGatherAndBroadcastReplaysWithNewDataEveryTime) {
  const std::size_t n = device_count();
  std::vector<DeviceMemory*> memory;
  for (std::size_t i = 0; i < n; ++i) {
    memory.push_back(&allocate(i, kBytes));
    xfer().set_device_buffer(i, memory[i]->get(), kBytes);
  }
  const DeviceGuard current(ordinal(0));  // a capturing stream is taken to be of the current device
  const Stream stream(ordinal(0));
  PinnedMemory before(n * kBytes);
  PinnedMemory after(n * kBytes);
  PinnedMemory source(kBytes);
  Graph graph;
  graph.capture(stream.get(), [&] {
    (void)xfer().gather_into_async(before.span(), stream.get());
    xfer().broadcast_async(source.span(), stream.get());
    (void)xfer().gather_into_async(after.span(), stream.get());
  });
  for (int r = 0; r < kReplays; ++r) {
    const std::uint64_t produced = seed(static_cast<std::size_t>(r));
    const std::uint64_t sent = other_seed(static_cast<std::uint64_t>(r));
    produce(memory, stream.get(), produced);
    pattern::fill_host(source.span(), sent);
    std::fill(before.span().begin(), before.span().end(), kPoison);
    std::fill(after.span().begin(), after.span().end(), kPoison);
    graph.launch(stream.get());
    stream.synchronize();
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(
          host_matches(before.span().subspan(i * kBytes, kBytes), produced + i, 0,
                       "replay " + std::to_string(r) + ", first gather, device " + std::to_string(i)));
      ASSERT_TRUE(host_matches(
          after.span().subspan(i * kBytes, kBytes), sent, 0,
          "replay " + std::to_string(r) + ", gather after the broadcast, device " + std::to_string(i)));
    }
  }
}

// gather_into_async into pinned memory (cudaHostAlloc'd, and ordinary memory under register_host), device
// i's buffer GetParam() + 13 i bytes, captured in thread-local and in global mode into an output 16-byte
// aligned and one 3 bytes past that, poison on both sides: a device's piece of at most 64 KiB, 16-byte
// aligned at both ends, into memory the device maps at its own address, is a kernel node (a graph replays
// it sooner than a memcpy node) unless Options::capture_copy_kernels is off, any other a memcpy node; each
// graph replayed with new data, every byte compared and the poison around the output intact.
class GpuCaptureBySize : public GpuCapture, public ::testing::WithParamInterface<std::size_t> {
 protected:
  void capture_gathers_and_replay();
};

void GpuCaptureBySize::capture_gathers_and_replay() {
  constexpr std::size_t kernel_max = 64 * kKiB;
  const bool kernels_on = manager().options().capture_copy_kernels;
  constexpr std::size_t guard = 64;
  const std::size_t n = device_count();
  std::vector<DeviceMemory*> memory;
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t size = GetParam() + 13 * i;
    memory.push_back(&allocate(i, size));
    xfer().set_device_buffer(i, memory[i]->get(), size);
    total += size;
  }
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  // Whether device i maps registered memory at its own address (cudaHostAlloc'd memory it always does).
  const auto maps_registered = [&](std::size_t i) {
    int can = 0;
    cuda_check(cudaDeviceGetAttribute(&can, cudaDevAttrCanUseHostPointerForRegisteredMem, ordinal(i)),
               "attribute");
    return can != 0;
  };
  const DeviceGuard current(ordinal(0));
  const Stream stream(ordinal(0));
  // Captures a gather into @p whole from byte @p shift on, checks its nodes, replays it with new data.
  const auto capture_and_replay = [&](std::span<std::byte> whole, std::size_t shift, bool registered,
                                      cudaStreamCaptureMode mode, const std::string& where) {
    const std::span<std::byte> into = whole.subspan(shift, total);
    Graph graph;
    std::vector<GatherPiece> pieces;
    graph.capture(
        stream.get(), [&] { pieces = xfer().gather_into_async(into, stream.get()); }, mode);
    std::size_t kernels = 0;  // pieces small, 16-byte aligned at both ends and mapped: kernel nodes
    for (const GatherPiece& p : pieces) {
      const bool mapped = !registered || maps_registered(p.device);
      kernels += kernels_on && p.size <= kernel_max && aligned(into.data() + p.offset) &&
                 aligned(memory[p.device]->get()) && mapped;
    }
    EXPECT_EQ(graph.nodes(cudaGraphNodeTypeKernel), kernels) << where;
    EXPECT_EQ(graph.nodes(cudaGraphNodeTypeMemcpy), n - kernels) << where;
    if (kernels_on && shift == 0 && GetParam() <= kernel_max && (!registered || maps_registered(0))) {
      EXPECT_GE(kernels, 1U) << where << ": device 0's piece is small, aligned and mapped";
    }
    for (int r = 0; r < 5; ++r) {
      const std::uint64_t produced = seed(static_cast<std::size_t>(r) + 10 * shift);
      produce(memory, stream.get(), produced);
      std::fill(whole.begin(), whole.end(), kPoison);
      graph.launch(stream.get());
      stream.synchronize();
      const std::string what = where + ", replay " + std::to_string(r);
      ASSERT_EQ(pieces.size(), n);
      for (const GatherPiece& p : pieces) {
        ASSERT_TRUE(host_matches(into.subspan(p.offset, p.size), produced + p.device, 0,
                                 what + ", device " + std::to_string(p.device)));
      }
      ASSERT_TRUE(host_is_poison(whole.first(shift), what + ", before the output"));
      ASSERT_TRUE(host_is_poison(whole.subspan(shift + total), what + ", after the output"));
    }
  };
  for (const cudaStreamCaptureMode mode : {cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeGlobal}) {
    const std::string in = mode == cudaStreamCaptureModeGlobal ? ", global mode" : ", thread-local mode";
    for (const std::size_t shift : {std::size_t{0}, std::size_t{3}}) {
      PinnedMemory pinned(shift + total + guard);
      capture_and_replay(pinned.span(), shift, false, mode,
                         "pinned output at +" + std::to_string(shift) + in);
      std::vector<std::byte> ordinary(shift + total + guard);
      const HostRegistration registration = register_host(ordinary);
      capture_and_replay(ordinary, shift, true, mode, "registered output at +" + std::to_string(shift) + in);
    }
  }
}

TEST_P(GpuCaptureBySize, AGatherIntoPinnedMemoryReplaysWithNewDataEveryTime) { capture_gathers_and_replay(); }

INSTANTIATE_TEST_SUITE_P(Bytes, GpuCaptureBySize,
                         ::testing::Values(1, 15, 16, 4096, 4099, 64 * kKiB - 13, 64 * kKiB, 64 * kKiB + 1,
                                           kMiB + 7),
                         size_param_name);

void keep_captures_on_copy_engines(Options& opts) { opts.capture_copy_kernels = false; }

// The same with Options::capture_copy_kernels off: every captured copy a memcpy node, small ones too.
using GpuCaptureOnCopyEngines = WithOptions<GpuCaptureBySize, keep_captures_on_copy_engines>;

TEST_P(GpuCaptureOnCopyEngines, AGatherIntoPinnedMemoryReplaysWithNewDataEveryTime) {
  ASSERT_FALSE(manager().options().capture_copy_kernels);
  capture_gathers_and_replay();
}

INSTANTIATE_TEST_SUITE_P(Bytes, GpuCaptureOnCopyEngines, ::testing::Values(16, 4096, 64 * kKiB),
                         size_param_name);

TEST_F(GpuCapture, WhatNeedsTheHostRefusesAndLeavesTheCaptureIntact) {
  register_pattern(0, kBytes);
  const DeviceGuard current(ordinal(0));
  const Stream stream(ordinal(0));
  std::vector<std::byte> pageable(kBytes * device_count());
  Graph graph;
  graph.capture(stream.get(), [&] {  // still a valid (empty) capture at the end
    EXPECT_TRUE(throws_error([&] { (void)xfer().gather_into_async(pageable, stream.get()); },
                             Errc::unsupported, "gather_into cannot be captured", "pageable"));
    EXPECT_TRUE(throws_error([&] { (void)xfer().gather_async(0, stream.get()); }, Errc::unsupported,
                             "gather cannot be captured", "gather_into_async"));
    EXPECT_TRUE(throws_error([&] { xfer().broadcast_async(std::span(pageable).first(kBytes), stream.get()); },
                             Errc::unsupported, "broadcast cannot be captured", "pageable"));
    const std::array<DeviceSlice, 1> slices{{{0, xfer().device_buffer(0)->ptr, 16}}};
    EXPECT_TRUE(throws_error([&] { (void)xfer().gather_slices_async(slices, pageable, stream.get()); },
                             Errc::unsupported, "gather_slices cannot be captured"));
  });
  graph.launch(stream.get());
  stream.synchronize();
}

// set_device_buffer inside the capture, with the capturing stream as the producer: CUDA refuses to tell a
// capturing stream's device (and invalidates the capture when asked), so the registration takes it to be
// of the current device, as the operations do; the gather after it replays with every replay's data.
TEST_F(GpuCapture, ABufferRegisteredWithTheCapturingStreamReplaysWithNewData) {
  const std::size_t n = device_count();
  std::vector<DeviceMemory*> memory;
  for (std::size_t i = 0; i < n; ++i) {
    memory.push_back(&allocate(i, kBytes));
    if (i != 0) xfer().set_device_buffer(i, memory[i]->get(), kBytes);
  }
  const DeviceGuard current(ordinal(0));
  const Stream stream(ordinal(0));
  PinnedMemory out(n * kBytes);
  Graph graph;
  graph.capture(stream.get(), [&] {
    xfer().set_device_buffer(0, memory[0]->get(), kBytes, stream.get());
    (void)xfer().gather_into_async(out.span(), stream.get());
  });
  for (int r = 0; r < 10; ++r) {
    const std::uint64_t produced = seed(static_cast<std::size_t>(r));
    produce(memory, stream.get(), produced);
    std::fill(out.span().begin(), out.span().end(), kPoison);
    graph.launch(stream.get());
    stream.synchronize();
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(host_matches(out.span().subspan(i * kBytes, kBytes), produced + i, 0,
                               "replay " + std::to_string(r) + ", device " + std::to_string(i)));
    }
  }
}

// The test's own thread relaxed for its scope: its waits must not be what disturbs the capture.
class TestRelaxed {
 public:
  TestRelaxed() { cuda_check(cudaThreadExchangeStreamCaptureMode(&mode_), "relax the test thread"); }
  ~TestRelaxed() { static_cast<void>(cudaThreadExchangeStreamCaptureMode(&mode_)); }
  TestRelaxed(const TestRelaxed&) = delete;
  TestRelaxed& operator=(const TestRelaxed&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// While one thread's stream captures in global mode (torch.cuda.graph's default), a CUDA call that CUDA
// counts unsafe from any other thread fails and invalidates that capture. Another thread runs every kind
// of operation meanwhile: the first leases of the pinned pool, blocking gathers into pinned, pageable and
// registered memory, a pageable broadcast, a handle polled and waited for, gather_to_device, a
// stream-ordered gather, gather_slices, (with 2 devices) a staged copy whose bytes a gather then finds on
// device 1, a manager and a transfer made and dropped; every one must succeed with the right bytes, and the
// capture (a producer kernel) must end intact and replay. Each step's failure is collected, so one run names
// them all.
TEST_F(GpuCapture, OperationsOnAnotherThreadLeaveAGlobalModeCaptureIntact) {
  const std::size_t n = device_count();
  for (std::size_t i = 0; i < n; ++i) register_pattern(i, kBytes);
  const DeviceGuard current(ordinal(0));
  const Stream captured(ordinal(0));
  const Stream theirs(ordinal(0));
  DeviceMemory& target = allocate(0, kBytes);
  DeviceMemory& on_device = allocate(0, n * kBytes);  // gather_to_device's output, counted after the capture
  poison_device(on_device.ordinal(), on_device.get(), on_device.size());
  bool gathered_on_device = false;
  PinnedMemory pinned(n * kBytes);  // CUDA allocations of the test itself: all before the capture
  std::vector<std::byte> pageable(n * kBytes);
  std::vector<std::byte> registered(n * kBytes);
  const std::vector<std::byte> sent = pattern_bytes(kBytes, other_seed(0));
  std::vector<std::string> failures;
  bool copied = false;          // device 1's buffer holds device 0's bytes, seed(0), after the staged copy
  bool broadcast_done = false;  // the buffers hold seed(i) before it, other_seed(0) after
  // Device @p i's bytes of @p out, expected in full.
  const auto want = [&](std::span<const std::byte> piece, std::size_t i, const std::string& what) {
    const std::uint64_t s = broadcast_done ? other_seed(0) : seed(copied && i == 1 ? 0 : i);
    const auto same = host_matches(piece, s, 0, what + ", device " + std::to_string(i));
    if (!same) failures.push_back(same.message());
  };
  const auto want_all = [&](std::span<const std::byte> out, const std::string& what) {
    for (std::size_t i = 0; i < n; ++i) want(out.subspan(i * kBytes, kBytes), i, what);
  };
  const auto step = [&](const std::string& what, const std::function<void()>& body) {
    try {
      body();
    } catch (const std::exception& e) {
      failures.push_back(what + ": " + e.what());
    }
  };
  const auto gathered_into = [&](std::span<std::byte> out, const std::string& what) {
    std::fill(out.begin(), out.end(), kPoison);
    (void)xfer().gather_into(out);
    want_all(out, what);
  };

  Graph graph;
  graph.begin(captured.get(), cudaStreamCaptureModeGlobal);
  pattern::fill_device(target.get(), kBytes, other_seed(1), 0, captured.get());
  std::thread other([&] {
    step("gather_all (the pool's first leases)", [&] {
      const std::vector<HostBuffer> results = xfer().gather_all();
      for (std::size_t i = 0; i < n; ++i) want(results.at(i).span(), i, "gather_all");
    });
    step("gather_into pageable memory", [&] { gathered_into(pageable, "gather_into pageable"); });
    step("gather_into registered memory", [&] {
      const HostRegistration registration = register_host(registered);
      gathered_into(registered, "gather_into registered");
    });
    step("gather_all_async, its handle polled with ready, then get", [&] {
      GatherHandle handle = xfer().gather_all_async(theirs.get());
      while (!handle.ready()) std::this_thread::yield();
      const std::vector<HostBuffer> results = handle.get();
      for (std::size_t i = 0; i < n; ++i) want(results.at(i).span(), i, "gather_all_async");
    });
    step("gather_to_device into device 0's memory", [&] {
      (void)xfer().gather_to_device(0, on_device.get(), n * kBytes);
      gathered_on_device = true;
    });
    step("gather_slices into pageable memory", [&] {
      std::vector<DeviceSlice> slices;
      for (std::size_t i = 0; i < n; ++i) slices.push_back({i, xfer().device_buffer(i)->ptr, kBytes});
      std::fill(pageable.begin(), pageable.end(), kPoison);
      (void)xfer().gather_slices(slices, pageable);
      want_all(pageable, "gather_slices");
    });
    if (n >= 2) {
      step("copy_device_buffer 0 -> 1, staged", [&] {
        xfer().copy_device_buffer(0, 1, CopyPath::staged);
        copied = true;
        gathered_into(pageable, "gather_into after the staged copy");
      });
    }
    step("broadcast from pageable memory", [&] {
      xfer().broadcast(sent);
      broadcast_done = true;
      gathered_into(pageable, "gather_into after the broadcast");
    });
    step("a manager and a transfer made, used and dropped", [&] {
      InterGpuTransfer fresh(MultiGpuManager::create(options()));
      for (std::size_t i = 0; i < n; ++i) fresh.set_device_buffer(i, xfer().device_buffer(i)->ptr, kBytes);
      std::fill(pageable.begin(), pageable.end(), kPoison);
      (void)fresh.gather_into(pageable);
      want_all(pageable, "a fresh transfer's gather_into");
    });
    // Last: the test's own wait relaxes this thread through the runtime, which makes a context current on
    // it, and the steps before run on a thread that has none, as a fresh application thread.
    step("gather_into_async on the thread's stream", [&] {
      std::fill(pinned.span().begin(), pinned.span().end(), kPoison);
      (void)xfer().gather_into_async(pinned.span(), theirs.get());
      {
        const TestRelaxed relaxed;
        theirs.synchronize();
      }
      want_all(pinned.span(), "gather_into_async");
    });
  });
  other.join();
  std::string all;
  for (const std::string& f : failures) all += "\n  " + f;
  EXPECT_TRUE(failures.empty()) << failures.size() << " steps on the other thread failed:" << all;
  graph.end(captured.get());  // throws, naming the error, when the capture was invalidated
  graph.launch(captured.get());
  captured.synchronize();
  EXPECT_TRUE(
      device_matches(ordinal(0), target.get(), kBytes, other_seed(1), 0, "the captured producer's output"));
  for (std::size_t i = 0; gathered_on_device && i < n; ++i) {
    EXPECT_TRUE(device_matches(ordinal(0), static_cast<const std::byte*>(on_device.get()) + i * kBytes,
                               kBytes, seed(i), 0, "gather_to_device, device " + std::to_string(i)));
  }
}

// A captured gpuxfer operation must keep its work off the streams that gpuxfer's other operations use:
// a stream that waits on a capturing stream's event joins that capture until it ends, so work another
// thread queues there meanwhile would fail (waiting on an event from outside the capture), be captured
// into the wrong graph, or merge two captures. One thread captures a gather, in thread-local and in
// global mode; while the capture is open, another thread gathers blocking and stream-ordered; then the
// capture ends holding only its own gather's nodes and replays with new data.
TEST_F(GpuCapture, AnOpenCaptureOfAGatherLeavesOtherThreadsGathersAlone) {
  const std::size_t n = device_count();
  std::vector<DeviceMemory*> memory;
  for (std::size_t i = 0; i < n; ++i) memory.push_back(&register_pattern(i, kBytes));
  const DeviceGuard current(ordinal(0));
  const Stream captured(ordinal(0));
  const Stream theirs(ordinal(0));
  PinnedMemory into(n * kBytes);
  PinnedMemory blocking(n * kBytes);
  PinnedMemory ordered(n * kBytes);
  for (const cudaStreamCaptureMode mode : {cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeGlobal}) {
    const std::string where = mode == cudaStreamCaptureModeGlobal ? "global mode" : "thread-local mode";
    for (std::size_t i = 0; i < n; ++i) fill_device(ordinal(i), memory[i]->get(), kBytes, seed(i));
    Graph graph;
    graph.begin(captured.get(), mode);
    std::vector<std::string> failures;
    try {
      (void)xfer().gather_into_async(into.span(), captured.get());
    } catch (const std::exception& e) {
      failures.push_back(std::string("the captured gather: ") + e.what());
    }
    std::thread other([&] {
      try {
        std::fill(blocking.span().begin(), blocking.span().end(), kPoison);
        (void)xfer().gather_into(blocking.span());
        for (std::size_t i = 0; i < n; ++i) {
          const auto same = host_matches(blocking.span().subspan(i * kBytes, kBytes), seed(i), 0,
                                         where + ", the blocking gather, device " + std::to_string(i));
          if (!same) failures.push_back(same.message());
        }
        std::fill(ordered.span().begin(), ordered.span().end(), kPoison);
        (void)xfer().gather_into_async(ordered.span(), theirs.get());
        const TestRelaxed relaxed;
        theirs.synchronize();
        for (std::size_t i = 0; i < n; ++i) {
          const auto same = host_matches(ordered.span().subspan(i * kBytes, kBytes), seed(i), 0,
                                         where + ", the stream-ordered gather, device " + std::to_string(i));
          if (!same) failures.push_back(same.message());
        }
      } catch (const std::exception& e) {
        failures.push_back(where + ", the other thread: " + e.what());
      }
    });
    other.join();
    std::string all;
    for (const std::string& f : failures) all += "\n  " + f;
    EXPECT_TRUE(failures.empty()) << all;
    graph.end(captured.get());  // throws, naming the error, when the capture was invalidated or left unjoined
    EXPECT_EQ(graph.nodes(cudaGraphNodeTypeMemcpy) + graph.nodes(cudaGraphNodeTypeKernel), n)
        << where << ": the graph holds the captured gather's copies alone";
    for (int r = 0; r < 3; ++r) {
      const std::uint64_t produced = seed(static_cast<std::size_t>(r) + 100);
      produce(memory, captured.get(), produced);
      std::fill(into.span().begin(), into.span().end(), kPoison);
      graph.launch(captured.get());
      captured.synchronize();
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(host_matches(into.span().subspan(i * kBytes, kBytes), produced + i, 0,
                                 where + ", replay " + std::to_string(r) + ", device " + std::to_string(i)));
      }
    }
  }
}

// Two threads each capture a gather on a stream of their own at the same time, in thread-local and in
// global mode: the two captures must not merge through a stream of gpuxfer's, and each ends holding its
// own copies and replays.
TEST_F(GpuCapture, TwoThreadsCaptureGathersAtOnce) {
  const std::size_t n = device_count();
  std::vector<DeviceMemory*> memory;
  for (std::size_t i = 0; i < n; ++i) memory.push_back(&register_pattern(i, kBytes));
  struct Side {
    explicit Side(int ordinal, std::size_t bytes) : stream(ordinal), out(bytes) {}
    Stream stream;
    PinnedMemory out;
    Graph graph;
    std::string failure;
  };
  for (const cudaStreamCaptureMode mode : {cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeGlobal}) {
    const std::string where = mode == cudaStreamCaptureModeGlobal ? "global mode" : "thread-local mode";
    std::vector<std::unique_ptr<Side>> sides;
    for (int t = 0; t < 2; ++t) sides.push_back(std::make_unique<Side>(ordinal(0), n * kBytes));
    std::atomic<int> begun{0};
    std::atomic<int> queued{0};
    std::vector<std::thread> threads;
    for (auto& owned : sides) {
      Side* side = owned.get();
      threads.emplace_back([&, side] {
        try {
          const DeviceGuard current(ordinal(0));
          side->graph.begin(side->stream.get(), mode);
          // Both captures open before either queues its gather.
          begun.fetch_add(1);
          while (begun.load() < 2) std::this_thread::yield();
          try {
            (void)xfer().gather_into_async(side->out.span(), side->stream.get());
          } catch (const std::exception& e) {
            side->failure = std::string("the captured gather: ") + e.what() + "; ";
          }
          // Neither capture ends before both gathers are queued.
          queued.fetch_add(1);
          while (queued.load() < 2) std::this_thread::yield();
          // The test's own instantiation must not be what disturbs the other thread's global-mode capture.
          const TestRelaxed relaxed;
          side->graph.end(side->stream.get());
        } catch (const std::exception& e) {
          side->failure += e.what();
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (std::size_t t = 0; t < sides.size(); ++t) {
      Side& side = *sides[t];
      const std::string who = where + ", thread " + std::to_string(t);
      ASSERT_TRUE(side.failure.empty()) << who << ": " << side.failure;
      EXPECT_EQ(side.graph.nodes(cudaGraphNodeTypeMemcpy) + side.graph.nodes(cudaGraphNodeTypeKernel), n)
          << who;
      const std::uint64_t produced = seed(200 + t);
      produce(memory, side.stream.get(), produced);
      std::fill(side.out.span().begin(), side.out.span().end(), kPoison);
      side.graph.launch(side.stream.get());
      side.stream.synchronize();
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(host_matches(side.out.span().subspan(i * kBytes, kBytes), produced + i, 0,
                                 who + ", device " + std::to_string(i)));
      }
    }
  }
}

class MultiGpuCapture : public GpuTest {
 protected:
  [[nodiscard]] std::size_t devices_needed() const override { return 2; }
};

// A peer copy and broadcast_from_device over NCCL captured once, replayed 100 times; before each replay a
// producer kernel writes seed r into device 0's buffer (on the graph's stream) and seed 1000 + r into
// device 1's; the graph copies 0 -> 1, then broadcasts device 1's buffer to every device.
TEST_F(MultiGpuCapture, APeerCopyAndAnNcclBroadcastReplayWithNewDataEveryTime) {
  if (!manager().peer_enabled(0, 1)) GTEST_SKIP() << "needs peer access between devices 0 and 1";
  if (manager().nccl_version() == 0) GTEST_SKIP() << "needs NCCL, which is " << manager().nccl_status();
  const std::size_t n = device_count();
  std::vector<DeviceMemory*> memory;
  for (std::size_t i = 0; i < n; ++i) {
    memory.push_back(&allocate(i, kBytes));
    xfer().set_device_buffer(i, memory[i]->get(), kBytes);
  }
  const DeviceGuard current(ordinal(0));
  const Stream stream(ordinal(0));
  Graph graph;
  graph.capture(stream.get(), [&] {
    (void)xfer().copy_device_buffer_async(0, 1, stream.get(), CopyPath::peer);
    xfer().broadcast_from_device_async(1, stream.get(), DeviceBroadcastPath::nccl);
  });
  for (int r = 0; r < kReplays; ++r) {
    const std::uint64_t produced = seed(static_cast<std::size_t>(r));
    for (std::size_t i = 1; i < n; ++i) {
      const DeviceGuard guard(ordinal(i));
      pattern::fill_device(memory[i]->get(), kBytes, other_seed(static_cast<std::uint64_t>(r)), 0,
                           cudaStreamLegacy);
      cuda_check(cudaStreamSynchronize(cudaStreamLegacy), "producer");
    }
    pattern::fill_device(memory[0]->get(), kBytes, produced, 0, stream.get());
    graph.launch(stream.get());
    stream.synchronize();
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(device_matches(ordinal(i), memory[i]->get(), kBytes, produced, 0,
                                 "replay " + std::to_string(r) + ", device " + std::to_string(i)));
    }
  }
}

// One stream per device, of which only some capture, or which capture into different graphs: refused
// before anything is queued (a stream that does not capture would run its device's part at once, and the
// join would mix the capture's events with others), and every capture stays intact.
TEST_F(MultiGpuCapture, PerDeviceStreamsThatDoNotCaptureIntoOneGraphAreRefused) {
  const std::size_t n = device_count();
  for (std::size_t i = 0; i < n; ++i) register_pattern(i, kBytes);
  PinnedMemory out(n * kBytes);
  std::vector<Stream> streams;
  std::vector<cudaStream_t> handles;
  for (std::size_t i = 0; i < n; ++i) handles.push_back(streams.emplace_back(ordinal(i)).get());
  const auto gather = [&] {
    (void)xfer().gather_into_async(out.span(), std::span<const cudaStream_t>(handles));
  };
  const DeviceGuard current(ordinal(0));
  {
    Graph graph;
    graph.capture(handles[0], [&] {
      EXPECT_TRUE(throws_error(gather, Errc::invalid_argument, "into one graph"))
          << "device 0's stream alone";
    });
  }
  {
    Graph first;
    Graph second;
    first.begin(handles[0]);
    second.begin(handles[1]);
    EXPECT_TRUE(throws_error(gather, Errc::invalid_argument, "into one graph")) << "two graphs";
    second.abandon(handles[1]);
    first.abandon(handles[0]);
  }
  // Every stream in the one capture is what the form captures.
  std::fill(out.span().begin(), out.span().end(), kPoison);
  Graph graph;
  graph.capture(handles[0], [&] {
    cudaEvent_t fork = nullptr;
    cuda_check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "fork event");
    cuda_check(cudaEventRecord(fork, handles[0]), "fork");
    for (std::size_t i = 1; i < n; ++i)
      cuda_check(cudaStreamWaitEvent(handles[i], fork, 0), "join the capture");
    gather();
    for (std::size_t i = 1; i < n; ++i) {
      cuda_check(cudaEventRecord(fork, handles[i]), "back");
      cuda_check(cudaStreamWaitEvent(handles[0], fork, 0), "rejoin");
    }
    static_cast<void>(cudaEventDestroy(fork));
  });
  graph.launch(handles[0]);
  cuda_check(cudaStreamSynchronize(handles[0]), "replay");
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(host_matches(out.span().subspan(i * kBytes, kBytes), seed(i), 0,
                             "replayed, device " + std::to_string(i)));
  }
}

}  // namespace
}  // namespace gpuxfer::test
