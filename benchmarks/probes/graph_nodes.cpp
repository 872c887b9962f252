// gpuxfer-probe-graph-nodes: what a CUDA graph replays sooner, a memcpy node or a kernel node, for a small
// copy between device memory and pinned host memory in each direction, beside the raw cudaMemcpyAsync +
// event the library's latency rows measure against. Each sample is one launch (or one raw copy) and a wait;
// the three forms interleaved sample by sample, 3 rounds of 2000 at 4 KiB, 64 KiB and 1 MiB on device 0;
// the bytes are checked. It is why enqueue_download makes a small captured download a kernel node and
// captured uploads stay memcpy nodes (docs/ARCHITECTURE.md, "Graph capture"). The kernel is the library's
// own (gpuxfer::detail::launch_copy, hence src/).
//
//   gpuxfer-probe-graph-nodes
//
// Exit 0 when the bytes were right, 1 otherwise or on a CUDA error, 2 without a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include "cuda/copy_kernels.hpp"
#include "probes/probe.hpp"

namespace {

using gpuxfer::probe::check;
using gpuxfer::probe::median;

constexpr int rounds = 3;
constexpr int samples = 2000;

unsigned char pattern(std::size_t i, unsigned salt) { return static_cast<unsigned char>(i * 7 + salt); }

// A graph of one memcpy (or, with @p kernel, the library's copy kernel, as enqueue_download captures it)
// from @p src to @p dst, instantiated.
cudaGraphExec_t capture(cudaStream_t stream, void* dst, const void* src, std::size_t bytes,
                        cudaMemcpyKind kind, bool kernel) {
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
  if (kernel) {
    check(gpuxfer::detail::launch_copy(dst, src, bytes, stream), "launch_copy");
  } else {
    check(cudaMemcpyAsync(dst, src, bytes, kind, stream), "cudaMemcpyAsync");
  }
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(stream, &graph), "end capture");
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  check(cudaGraphDestroy(graph), "destroy graph");
  check(cudaGraphUpload(exec, stream), "upload graph");
  return exec;
}

// Times the raw copy, the memcpy graph and the kernel graph of @p bytes in direction @p kind, interleaved;
// false when a copy left wrong bytes. A download's source is written on @p stream itself: a cudaMemcpy
// from pageable memory may return before its DMA lands, and @p stream (non-blocking) would not wait for it.
bool measure(cudaStream_t stream, cudaEvent_t event, std::size_t bytes, cudaMemcpyKind kind) {
  const bool download = kind == cudaMemcpyDeviceToHost;
  void* device = nullptr;
  unsigned char* host = nullptr;
  check(cudaMalloc(&device, bytes), "cudaMalloc");
  check(cudaHostAlloc(reinterpret_cast<void**>(&host), bytes, cudaHostAllocPortable), "cudaHostAlloc");
  std::vector<unsigned char> expected(bytes);
  void* dst = download ? static_cast<void*>(host) : device;
  const void* src = download ? device : static_cast<const void*>(host);
  const cudaGraphExec_t graphs[2] = {capture(stream, dst, src, bytes, kind, false),
                                     capture(stream, dst, src, bytes, kind, true)};
  const std::function<void()> forms[3] = {[&] {
                                            check(cudaMemcpyAsync(dst, src, bytes, kind, stream),
                                                  "cudaMemcpyAsync");
                                            check(cudaEventRecord(event, stream), "cudaEventRecord");
                                            check(cudaEventSynchronize(event), "cudaEventSynchronize");
                                          },
                                          [&] {
                                            check(cudaGraphLaunch(graphs[0], stream), "launch");
                                            check(cudaStreamSynchronize(stream), "synchronise");
                                          },
                                          [&] {
                                            check(cudaGraphLaunch(graphs[1], stream), "launch");
                                            check(cudaStreamSynchronize(stream), "synchronise");
                                          }};
  const char* names[3] = {"raw copy + event", "memcpy node", "kernel node"};
  std::size_t wrong[3] = {0, 0, 0};  // samples of each form that left wrong bytes
  unsigned salt = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<double> us[3];
    for (int s = 0; s < samples; ++s) {
      for (int f = 0; f < 3; ++f) {
        ++salt;
        for (std::size_t i = 0; i < bytes; ++i) expected[i] = pattern(i, salt);
        if (download) {
          check(cudaMemcpyAsync(device, expected.data(), bytes, cudaMemcpyHostToDevice, stream),
                "fill the device");
          check(cudaStreamSynchronize(stream), "fill the device");
          std::fill(host, host + bytes, static_cast<unsigned char>(0xA5));
        } else {
          std::copy(expected.begin(), expected.end(), host);
        }
        const auto start = std::chrono::steady_clock::now();
        forms[f]();
        us[f].push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
        if (!download && s % 100 != 0) continue;  // uploads checked every 100th sample (a copy back)
        std::vector<unsigned char> got(bytes);
        if (download) {
          std::copy(host, host + bytes, got.begin());
        } else {
          check(cudaMemcpy(got.data(), device, bytes, cudaMemcpyDeviceToHost), "read the device back");
        }
        wrong[f] += got == expected ? 0 : 1;
      }
    }
    std::printf("%s %7zu bytes, round %d:", download ? "D2H" : "H2D", bytes, round);
    for (int f = 0; f < 3; ++f) std::printf("  %s %.2f us", names[f], median(us[f]));
    std::printf("\n");
  }
  const bool right = wrong[0] + wrong[1] + wrong[2] == 0;
  if (!right) {
    std::printf("%s %7zu bytes: samples with wrong bytes: raw copy %zu, memcpy node %zu, kernel node %zu\n",
                download ? "D2H" : "H2D", bytes, wrong[0], wrong[1], wrong[2]);
  }
  for (cudaGraphExec_t g : graphs) check(cudaGraphExecDestroy(g), "destroy graph");
  check(cudaFreeHost(host), "cudaFreeHost");
  check(cudaFree(device), "cudaFree");
  return right;
}

}  // namespace

int main() {
  if (!gpuxfer::probe::has_device()) return 2;
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  bool right = true;
  for (const cudaMemcpyKind kind : {cudaMemcpyDeviceToHost, cudaMemcpyHostToDevice}) {
    for (const std::size_t bytes : {std::size_t{4} << 10, std::size_t{64} << 10, std::size_t{1} << 20}) {
      right = measure(stream, event, bytes, kind) && right;
    }
  }
  check(cudaEventDestroy(event), "cudaEventDestroy");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  std::printf("# gpuxfer-probe-graph-nodes: %s\n", right ? "OK: every byte right" : "FAILED: wrong bytes");
  return right ? 0 : 1;
}
