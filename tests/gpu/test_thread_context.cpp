// What the calling thread's CUDA context is after an operation: a thread that had none still has none
// (restoring "device 0" would leave device 0's primary context current, and create it, hundreds of MiB,
// when the manager does not use device 0), and a thread that had one has exactly that one again, a
// context the caller created itself included. The context is read from the driver (cuCtxGetCurrent).
#include <cuda.h>
#include <cudaTypedefs.h>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

// The driver calls the test makes itself, through the runtime's entry points (nothing links libcuda).
struct Driver {
  PFN_cuCtxGetCurrent_v4000 get_current = nullptr;
  PFN_cuCtxCreate_v3020 create = nullptr;
  PFN_cuCtxDestroy_v4000 destroy = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
};

template <class Fn>
void load(Fn& fn, const char* name, unsigned version) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult status{};
  cuda_check(cudaGetDriverEntryPointByVersion(name, &entry, version, cudaEnableDefault, &status), name);
  if (status != cudaDriverEntryPointSuccess)
    throw std::runtime_error(std::string("no driver entry point ") + name);
  fn = reinterpret_cast<Fn>(entry);
}

const Driver& driver() {
  static const Driver loaded = [] {
    Driver d;
    load(d.get_current, "cuCtxGetCurrent", 4000);
    load(d.create, "cuCtxCreate", 3020);
    load(d.destroy, "cuCtxDestroy", 4000);
    load(d.device_get, "cuDeviceGet", 2000);
    return d;
  }();
  return loaded;
}

void driver_check(CUresult result, const std::string& what) {
  if (result != CUDA_SUCCESS) throw std::runtime_error(what + " failed: CUresult " + std::to_string(result));
}

CUcontext current_context() {
  CUcontext ctx = nullptr;
  driver_check(driver().get_current(&ctx), "cuCtxGetCurrent");
  return ctx;
}

// A context the test creates on @p ordinal (not the primary one) and makes current on this thread.
class CreatedContext {
 public:
  explicit CreatedContext(int ordinal) {
    CUdevice device = 0;
    driver_check(driver().device_get(&device, ordinal), "cuDeviceGet");
    driver_check(driver().create(&ctx_, 0, device), "cuCtxCreate");
  }
  ~CreatedContext() { static_cast<void>(driver().destroy(ctx_)); }
  CreatedContext(const CreatedContext&) = delete;
  CreatedContext& operator=(const CreatedContext&) = delete;
  [[nodiscard]] CUcontext get() const noexcept { return ctx_; }

 private:
  CUcontext ctx_ = nullptr;
};

// Runs @p op on a new thread whose context is made by @p before (nothing: a thread that has made no
// CUDA call) and says what went wrong: the context after op is not the one before, or op threw. Empty
// when the thread ends with the context it had.
std::string context_change(const std::function<void()>& op, const std::function<void()>& before = {}) {
  std::string problem;
  std::thread thread([&] {
    try {
      if (before) before();
      const CUcontext had = current_context();
      if (!before && had != nullptr) {
        problem = "a thread that made no CUDA call already has a current context";
        return;
      }
      op();
      const CUcontext has = current_context();
      if (has != had) {
        int device = -1;
        static_cast<void>(cudaGetDevice(&device));
        problem = std::string(had == nullptr ? "no context before" : "a context before") + ", " +
                  (has == nullptr ? "none" : "another (of CUDA ordinal " + std::to_string(device) + ")") +
                  " current after";
      }
    } catch (const std::exception& e) {
      problem = std::string("threw: ") + e.what();
    }
  });
  thread.join();
  return problem;
}

using GpuThreadContext = SmallChunks<GpuTest>;
using MultiGpuThreadContext = SmallChunks<MultiGpuTest>;

constexpr std::size_t kBytes = 3 * kMiB + 5;

TEST_F(GpuThreadContext, RegisterAndGatherAllLeaveNoContext) {
  std::vector<DeviceMemory*> memory;
  for (std::size_t i = 0; i < device_count(); ++i) {
    memory.push_back(&allocate(i, kBytes + i));
    fill_device(ordinal(i), memory.back()->get(), kBytes + i, seed(i));
  }
  std::vector<HostBuffer> out;
  EXPECT_EQ(context_change([&] {
              for (std::size_t i = 0; i < memory.size(); ++i) {
                xfer().set_device_buffer(i, memory[i]->get(), memory[i]->size());
              }
              out = xfer().gather_all();
            }),
            "");
  ASSERT_EQ(out.size(), device_count());
  for (std::size_t i = 0; i < out.size(); ++i)
    EXPECT_TRUE(host_matches(out[i].span(), seed(i), 0, "gather_all"));
}

TEST_F(GpuThreadContext, BroadcastsAndGatherIntoLeaveNoContext) {
  for (std::size_t i = 0; i < device_count(); ++i) register_pattern(i, kBytes);
  const std::vector<std::byte> data = pattern_bytes(kBytes, other_seed(0));
  PinnedMemory pinned(kBytes);
  pattern::fill_host(std::span(pinned.data(), kBytes), other_seed(1));
  std::vector<std::byte> into(device_count() * kBytes);
  for (const HostBroadcastPath path : {HostBroadcastPath::per_device, HostBroadcastPath::automatic}) {
    EXPECT_EQ(context_change([&] { xfer().broadcast(data, path); }), "") << "broadcast of pageable data";
    EXPECT_EQ(context_change([&] { xfer().broadcast(std::span(pinned.data(), kBytes), path); }), "")
        << "broadcast of pinned data";
  }
  EXPECT_EQ(context_change([&] { static_cast<void>(xfer().gather_into(into)); }), "") << "gather_into";
  for (std::size_t i = 0; i < device_count(); ++i) {
    EXPECT_TRUE(host_matches(std::span(into).subspan(i * kBytes, kBytes), other_seed(1), 0, "gather_into"));
  }
}

// Two gathers of one buffer in flight at once, both held back by the buffer's slow producer: the second
// one's ordering drops the reads of the first that are done, asking CUDA about one that is not. They are
// stream-ordered on a stream of the test's (device 0's), so that they read device 0's buffer on one GPU too.
TEST_F(GpuThreadContext, GathersInFlightTogetherLeaveNoContext) {
  constexpr std::uint64_t kHoldNs = 200'000'000;
  DeviceMemory& memory = allocate(0, kBytes);
  for (std::size_t i = 1; i < device_count(); ++i) register_pattern(i, kBytes);
  const Stream producer(ordinal(0));
  const Stream caller(ordinal(0));
  {
    const DeviceGuard guard(ordinal(0));
    pattern::fill_device_slow(memory.get(), kBytes, seed(0), kHoldNs, producer.get());
  }
  xfer().set_device_buffer(0, memory.get(), kBytes, producer.get());
  std::vector<HostBuffer> first;
  std::vector<HostBuffer> second;
  EXPECT_EQ(context_change([&] {
              GatherHandle a = xfer().gather_all_async(caller.get());
              GatherHandle b = xfer().gather_all_async(caller.get());
              first = a.get();
              second = b.get();
            }),
            "");
  ASSERT_EQ(first.size(), device_count());
  ASSERT_EQ(second.size(), device_count());
  EXPECT_TRUE(host_matches(first[0].span(), seed(0), 0, "the first gather"));
  EXPECT_TRUE(host_matches(second[0].span(), seed(0), 0, "the second gather"));
}

// The form with one stream per device asks each stream's device, and a handle makes a stream of the
// caller's wait: both about streams of the caller's, on a thread that has no context (the gathers are held
// back by a stall on a stream of their own, so that the handle is still in flight when it chains).
TEST_F(GpuThreadContext, PerDeviceStreamsAndAHandlesStreamWaitLeaveNoContext) {
  for (std::size_t i = 0; i < device_count(); ++i) register_pattern(i, kBytes);
  std::vector<Stream> streams;
  std::vector<cudaStream_t> handles;
  for (std::size_t i = 0; i < device_count(); ++i) handles.push_back(streams.emplace_back(ordinal(i)).get());
  const Stream caller(ordinal(0));
  const Stream chained(ordinal(0));
  DeviceMemory& scratch = allocate(0, kMiB);
  const auto stall = [&](cudaStream_t stream) {
    const DeviceGuard guard(ordinal(0));
    pattern::fill_device_slow(scratch.get(), scratch.size(), 1, 100'000'000, stream);
  };
  std::vector<HostBuffer> out;
  stall(handles[0]);
  EXPECT_EQ(context_change([&] {
              GatherHandle h = xfer().gather_all_async(std::span<const cudaStream_t>(handles));
              out = h.get();
            }),
            "")
      << "gather_all_async with one stream per device";
  ASSERT_EQ(out.size(), device_count());
  for (std::size_t i = 0; i < out.size(); ++i)
    EXPECT_TRUE(host_matches(out[i].span(), seed(i), 0, "per device"));
  stall(caller.get());
  EXPECT_EQ(context_change([&] {
              GatherHandle h = xfer().gather_all_async(caller.get());
              h.stream_wait(chained.get());
              out = h.get();
            }),
            "")
      << "a gather handle's stream_wait";
  chained.synchronize();
  ASSERT_EQ(out.size(), device_count());
  for (std::size_t i = 0; i < out.size(); ++i)
    EXPECT_TRUE(host_matches(out[i].span(), seed(i), 0, "chained"));
}

TEST_F(GpuThreadContext, PoolAndHostRegistrationLeaveNoContext) {
  PinnedPool& pool = manager().pinned_pool();
  pool.trim();
  const std::size_t allocations = pool.stats().allocations;
  // An odd size no earlier lease cached: the pool pins a new block, then trim unpins it.
  EXPECT_EQ(context_change([&] {
              HostBuffer block = pool.acquire(5 * kMiB + 4096 * 3);
              pattern::fill_host(block.span(), seed(0));
              block.reset();
              pool.trim();
            }),
            "")
      << "the manager's pool";
  EXPECT_GT(pool.stats().allocations, allocations) << "the lease was served from the cache: nothing pinned";
  EXPECT_EQ(context_change([&] {
              PinnedPool own(16 * kMiB);
              HostBuffer block = own.acquire(kMiB);
              pattern::fill_host(block.span(), seed(0));
            }),
            "")
      << "a pool of no manager";
  std::vector<std::byte> memory(2 * kMiB);
  EXPECT_EQ(context_change([&] { HostRegistration registration = register_host(memory); }), "")
      << "register_host";
}

TEST_F(GpuThreadContext, ManagerMadeAndDroppedOnAThreadLeavesNoContext) {
  DeviceMemory& mem = allocate(0, kBytes);  // here: the test's own helpers restore "device 0"
  fill_device(mem.ordinal(), mem.get(), kBytes, seed(0));
  std::vector<HostBuffer> out;
  EXPECT_EQ(context_change([&] {
              auto other = MultiGpuManager::create(options());
              InterGpuTransfer engine(other);
              engine.set_device_buffer(0, mem.get(), mem.size());
              out = engine.gather_all();
            }),
            "");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(host_matches(out[0].span(), seed(0), 0, "gather_all of a manager made on the thread"));
}

TEST_F(GpuThreadContext, PrimaryContextOfTheCallersDeviceStaysCurrent) {
  for (std::size_t i = 0; i < device_count(); ++i) register_pattern(i, kBytes);
  const int last = ordinal(device_count() - 1);
  const std::vector<std::byte> data = pattern_bytes(kBytes, other_seed(0));
  EXPECT_EQ(context_change(
                [&] {
                  xfer().broadcast(data);
                  static_cast<void>(xfer().gather_all());
                  int device = -1;
                  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
                  if (device != last) throw std::runtime_error("current device " + std::to_string(device));
                },
                [&] { cuda_check(cudaSetDevice(last), "cudaSetDevice"); }),
            "");
}

TEST_F(GpuThreadContext, ContextTheCallerCreatedStaysCurrent) {
  for (std::size_t i = 0; i < device_count(); ++i) register_pattern(i, kBytes);
  const std::vector<std::byte> data = pattern_bytes(kBytes, other_seed(0));
  std::optional<CreatedContext> created;
  EXPECT_EQ(context_change(
                [&] {
                  xfer().broadcast(data);
                  const std::vector<HostBuffer> out = xfer().gather_all();
                  HostBuffer block = manager().pinned_pool().acquire(7 * kMiB + 4096 * 5);
                  if (out.empty() || pattern::count_mismatches_host(out[0].span(), other_seed(0)) != 0) {
                    throw std::runtime_error("gather_all after broadcast: wrong bytes");
                  }
                },
                [&] { created.emplace(ordinal(0)); }),
            "");
}

// A block the pool allocates while a context the caller created is current must not belong to that
// context: the pool keeps the block after the call, and a context destroyed takes its allocations with
// it. Here the block goes back to the pool, the caller destroys its context, and the pool hands the block
// out again: it must still be page-locked memory that the GPU copies into.
TEST_F(GpuThreadContext, APooledBlockOutlivesTheCallersContext) {
  constexpr std::size_t bytes = 5 * kMiB + 4096 * 3;
  const std::byte* first = nullptr;
  std::string problem;
  std::thread thread([&] {
    try {
      const CreatedContext created(ordinal(0));
      const HostBuffer block = manager().pinned_pool().acquire(bytes);
      first = block.data();
    } catch (const std::exception& e) {
      problem = e.what();
    }
  });  // the block back in the pool, then the context destroyed
  thread.join();
  ASSERT_EQ(problem, "");
  const std::size_t reuses = manager().pinned_pool().stats().reuses;
  HostBuffer again = manager().pinned_pool().acquire(bytes);
  ASSERT_EQ(manager().pinned_pool().stats().reuses, reuses + 1)
      << "the pool did not hand out its cached block";
  ASSERT_EQ(again.data(), first);
  cudaPointerAttributes attributes{};
  cuda_check(cudaPointerGetAttributes(&attributes, again.data()), "cudaPointerGetAttributes");
  // Touched only while page-locked: a block gone with the context may be unmapped.
  ASSERT_EQ(attributes.type, cudaMemoryTypeHost) << "the pooled block died with the caller's context";
  DeviceMemory& source = allocate(0, bytes);
  fill_device(source.ordinal(), source.get(), bytes, seed(0));
  {
    const DeviceGuard guard(source.ordinal());
    cuda_check(cudaMemcpy(again.data(), source.get(), bytes, cudaMemcpyDeviceToHost),
               "cudaMemcpy into the block");
  }
  EXPECT_TRUE(host_matches(std::span(again.data(), bytes), seed(0), 0, "the reused block"));
}

// The same for register_host: a registration made while a context the caller created is current must
// outlive that context, for the registration is the caller's (HostRegistration), not the context's. Here
// the caller registers on a thread with its own context and destroys that context; the memory must still
// be page-locked, operations must DMA straight into it and deliver every byte, and reset must unlock it
// without a failure left behind.
TEST_F(GpuThreadContext, ARegistrationOutlivesTheCallersContext) {
  constexpr std::size_t bytes = 4 * kMiB + 4096 * 3 + 7;
  for (std::size_t i = 0; i < device_count(); ++i) register_pattern(i, bytes);
  std::vector<std::byte> memory(bytes * device_count(), kPoison);
  HostRegistration registration;
  std::string problem;
  std::thread thread([&] {
    try {
      const CreatedContext created(ordinal(0));
      registration = register_host(memory);
    } catch (const std::exception& e) {
      problem = e.what();
    }
  });  // the caller's context destroyed, the registration kept
  thread.join();
  ASSERT_EQ(problem, "");
  ASSERT_FALSE(registration.empty());
  cudaPointerAttributes attributes{};
  cuda_check(cudaPointerGetAttributes(&attributes, memory.data()), "cudaPointerGetAttributes");
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost) << "the registration died with the caller's context";
  cuda_check(cudaPointerGetAttributes(&attributes, memory.data() + memory.size() - 1), "cudaPointerGetAttributes");
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost) << "the registration's last byte";
  const std::size_t before = leases(manager().pinned_pool());
  const std::vector<GatherPiece> pieces = xfer().gather_into(memory);
  EXPECT_EQ(leases(manager().pinned_pool()), before) << "gather_into staged the registered output";
  EXPECT_TRUE(gathered_every_device(pieces, memory, bytes, "the registered output"));
  registration.reset();
  ASSERT_EQ(cudaGetLastError(), cudaSuccess) << "reset left a failure behind";
  cuda_check(cudaPointerGetAttributes(&attributes, memory.data()), "cudaPointerGetAttributes");
  EXPECT_EQ(attributes.type, cudaMemoryTypeUnregistered) << "reset did not unlock the memory";
}

TEST_F(MultiGpuThreadContext, DeviceToDeviceOperationsLeaveNoContext) {
  DeviceMemory& a = register_pattern(0, kBytes);
  DeviceMemory& b = register_pattern(1, kBytes);
  std::vector<CopyPath> paths{CopyPath::staged};
  if (manager().peer_enabled(0, 1)) paths.push_back(CopyPath::peer);
  for (const CopyPath path : paths) {
    EXPECT_EQ(context_change([&] { xfer().copy_device_buffer(0, 1, path); }), "") << "copy_device_buffer";
    EXPECT_TRUE(device_matches(b.ordinal(), b.get(), kBytes, seed(0), 0, "copy 0 -> 1"));
    fill_device(b.ordinal(), b.get(), kBytes, seed(1));
  }
  std::vector<DeviceBroadcastPath> broadcasts{DeviceBroadcastPath::peer};
  if (manager().nccl_available()) broadcasts.push_back(DeviceBroadcastPath::nccl);
  for (const DeviceBroadcastPath path : broadcasts) {
    EXPECT_EQ(context_change([&] { xfer().broadcast_from_device(1, path); }), "") << "broadcast_from_device";
    EXPECT_TRUE(device_matches(a.ordinal(), a.get(), kBytes, seed(1), 0, "broadcast from 1"));
    fill_device(a.ordinal(), a.get(), kBytes, seed(0));
  }
  DeviceMemory& out = allocate(1, 2 * kBytes);
  EXPECT_EQ(context_change([&] { static_cast<void>(xfer().gather_to_device(1, out.get(), out.size())); }), "")
      << "gather_to_device";
  EXPECT_TRUE(
      device_matches(out.ordinal(), out.get(), kBytes, seed(0), 0, "gather_to_device, device 0's part"));
  EXPECT_TRUE(
      device_matches(out.ordinal(), out.get() + kBytes, kBytes, seed(1), 0, "gather_to_device, device 1's"));
}

}  // namespace
}  // namespace gpuxfer::test
