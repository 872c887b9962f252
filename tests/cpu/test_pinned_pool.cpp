// PinnedPool and HostBuffer without a GPU: empty leases need no CUDA, real ones fail with a clear code
// (or, on a machine with a GPU, behave as a cache). HostBuffer's empty and moved-from states.
#include <cstring>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/host_buffer.hpp>
#include <gpuxfer/pinned_pool.hpp>

#include "common/expect_error.hpp"
#include "memory/pool_state.hpp"

namespace gpuxfer {
namespace {

constexpr std::size_t kLimit = std::size_t{1} << 20;

TEST(HostBuffer, DefaultIsEmpty) {
  HostBuffer buffer;
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(buffer.size(), 0u);
  EXPECT_EQ(buffer.data(), nullptr);
  EXPECT_TRUE(buffer.span().empty());
  EXPECT_TRUE(buffer.to_vector().empty());
  buffer.shrink(10);
  EXPECT_EQ(buffer.size(), 0u) << "shrink never grows";
  buffer.reset();
  buffer.reset();
  EXPECT_TRUE(buffer.empty());
}

TEST(HostBuffer, MovedFromEmptyIsEmpty) {
  HostBuffer a;
  HostBuffer b(std::move(a));
  EXPECT_TRUE(b.empty());
  HostBuffer c;
  c = std::move(b);
  EXPECT_TRUE(c.empty());
}

TEST(PinnedPool, NewPoolHasNothing) {
  const PinnedPool pool(kLimit);
  const PoolStats stats = pool.stats();
  EXPECT_EQ(stats.limit, kLimit);
  EXPECT_EQ(stats.in_use, 0u);
  EXPECT_EQ(stats.cached, 0u);
  EXPECT_EQ(stats.pending, 0u);
  EXPECT_EQ(stats.allocations, 0u);
}

TEST(PinnedPool, AcquireZeroGivesAnEmptyBufferWithoutCuda) {
  PinnedPool pool(kLimit);
  HostBuffer buffer = pool.acquire(0);
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(buffer.size(), 0u);
  EXPECT_EQ(pool.stats().allocations, 0u);
  EXPECT_EQ(pool.stats().in_use, 0u);
}

TEST(PinnedPool, AcquireBeyondTheLimitIsOutOfMemory) {
  PinnedPool pool(kLimit);
  EXPECT_TRUE(test::throws_error([&] { (void)pool.acquire(kLimit + 1); }, Errc::out_of_memory));
  EXPECT_EQ(pool.stats().in_use, 0u);
}

TEST(PinnedPool, TrimOfAnEmptyPoolIsFine) {
  PinnedPool pool(kLimit);
  pool.trim();
  EXPECT_EQ(pool.stats().cached, 0u);
}

// Without a GPU cudaHostAlloc fails: out_of_memory or cuda_error, nothing counted as in use. With one,
// the pool must behave as a cache: the block comes back and is reused.
TEST(PinnedPool, AcquireWithOrWithoutAGpu) {
  PinnedPool pool(kLimit);
  HostBuffer buffer;
  try {
    buffer = pool.acquire(4096);
  } catch (const Error& e) {
    EXPECT_TRUE(e.code() == Errc::out_of_memory || e.code() == Errc::cuda_error || e.code() == Errc::no_device)
        << "Errc::" << to_string(e.code()) << ": " << e.what();
    EXPECT_FALSE(std::string(e.what()).empty());
    EXPECT_EQ(pool.stats().in_use, 0u);
    EXPECT_EQ(pool.stats().cached, 0u);
    return;
  }
  // A GPU is present.
  ASSERT_EQ(buffer.size(), 4096u);
  ASSERT_NE(buffer.data(), nullptr);
  std::memset(buffer.data(), 0x5A, buffer.size());
  EXPECT_EQ(buffer.to_vector().size(), 4096u);
  EXPECT_EQ(buffer.to_vector()[4095], std::byte{0x5A});
  EXPECT_GE(pool.stats().in_use, 4096u);
  EXPECT_EQ(pool.stats().allocations, 1u);
  const std::byte* block = buffer.data();

  HostBuffer moved(std::move(buffer));
  EXPECT_TRUE(buffer.empty());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_EQ(buffer.data(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(moved.data(), block);
  moved.shrink(100);
  EXPECT_EQ(moved.size(), 100u);
  moved.shrink(200);
  EXPECT_EQ(moved.size(), 100u) << "shrink never grows";

  moved.reset();
  EXPECT_TRUE(moved.empty());
  EXPECT_EQ(pool.stats().in_use, 0u);
  EXPECT_GE(pool.stats().cached, 4096u);
  HostBuffer again = pool.acquire(4000);
  EXPECT_EQ(again.size(), 4000u);
  EXPECT_EQ(pool.stats().allocations, 1u) << "a cached block fits";
  EXPECT_GE(pool.stats().reuses, 1u);
  again.reset();
  pool.trim();
  EXPECT_EQ(pool.stats().cached, 0u);
}

TEST(PinnedPool, BufferOutlivesItsPool) {
  HostBuffer survivor;
  {
    PinnedPool pool(kLimit);
    try {
      survivor = pool.acquire(64);
    } catch (const Error&) {
      return;  // no GPU: nothing to lease; the empty case is covered above
    }
  }
  ASSERT_EQ(survivor.size(), 64u);
  std::memset(survivor.data(), 1, survivor.size());
  survivor.reset();  // gives the block back to the pool's state, which the lease kept alive
}

// Which statuses of an event let a pending block go back to the cache: completion and the device's end
// (any fault, a destroyed context); never a query CUDA refused (an event recorded in a capture, a capture
// in global mode where a query is not relaxed), which says nothing about the DMA still reading the block.
TEST(PinnedPoolPending, ABlockLeavesThePendingListOnlyWhenTheGpuIsDoneWithIt) {
  for (const cudaError_t done : {cudaSuccess, cudaErrorIllegalAddress, cudaErrorLaunchFailure,
                                 cudaErrorContained, cudaErrorExternalDevice, cudaErrorMpsClientTerminated,
                                 cudaErrorContextIsDestroyed, cudaErrorCudartUnloading}) {
    EXPECT_TRUE(detail::gpu_done_with(done)) << cudaGetErrorName(done);
  }
  for (const cudaError_t busy : {cudaErrorNotReady, cudaErrorCapturedEvent, cudaErrorStreamCaptureUnsupported,
                                 cudaErrorStreamCaptureImplicit, cudaErrorStreamCaptureInvalidated,
                                 cudaErrorStreamCaptureWrongThread, cudaErrorNotPermitted}) {
    EXPECT_FALSE(detail::gpu_done_with(busy)) << cudaGetErrorName(busy);
  }
}

}  // namespace
}  // namespace gpuxfer
