// register_host on a GPU: operations on registered caller memory DMA straight to and from it (they lease
// no staging from the pool) and deliver every byte; a registration that ends inside the range is staged
// instead; overlaps and memory that is already pinned are refused; reset gives the memory back.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

// Page-aligned anonymous memory, so that two registrations never share a page by accident.
class Pages {
 public:
  explicit Pages(std::size_t bytes) : size_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap of " + std::to_string(bytes) + " bytes failed");
    data_ = static_cast<std::byte*>(p);
  }
  ~Pages() { munmap(data_, size_); }
  Pages(const Pages&) = delete;
  Pages& operator=(const Pages&) = delete;

  [[nodiscard]] std::span<std::byte> span() const noexcept { return {data_, size_}; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

std::size_t page() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

class GpuHostRegistration : public GpuTest {};

class GpuHostRegistrationBySize : public GpuTest, public ::testing::WithParamInterface<std::size_t> {};

TEST_P(GpuHostRegistrationBySize, GatherIntoRegisteredMemoryIsDirect) {
  const std::size_t bytes = GetParam();
  for (std::size_t i = 0; i < device_count(); ++i) register_pattern(i, bytes);
  std::vector<std::byte> out(bytes * device_count() + 4096, kPoison);  // ordinary, unaligned memory
  const HostRegistration reg = register_host(out);
  const std::size_t before = leases(manager().pinned_pool());
  const std::vector<GatherPiece> pieces = xfer().gather_into(out);
  EXPECT_EQ(leases(manager().pinned_pool()), before) << "gather_into staged a registered output";
  EXPECT_TRUE(gathered_every_device(pieces, out, bytes, "registered output"));
  EXPECT_TRUE(host_is_poison(std::span(out).subspan(bytes * device_count()), "bytes past the payload"));
}

TEST_P(GpuHostRegistrationBySize, BroadcastAndCopyFromRegisteredMemoryAreDirect) {
  const std::size_t bytes = GetParam();
  for (std::size_t i = 0; i < device_count(); ++i) register_pattern(i, bytes);
  std::vector<std::byte> data = pattern_bytes(bytes, other_seed(0));
  const HostRegistration reg = register_host(data);
  const std::size_t before = leases(manager().pinned_pool());
  xfer().broadcast(data);
  EXPECT_EQ(leases(manager().pinned_pool()), before) << "broadcast staged a registered source";
  for (std::size_t i = 0; i < device_count(); ++i) {
    EXPECT_TRUE(device_matches(ordinal(i), memory_[i].get(), bytes, other_seed(0), 0, "broadcast from registered memory"));
  }
  std::vector<std::byte> second = pattern_bytes(bytes, other_seed(1));
  std::copy(second.begin(), second.end(), data.begin());
  xfer().copy_buffer(0, 0, data);
  EXPECT_EQ(leases(manager().pinned_pool()), before) << "copy_buffer staged a registered source";
  EXPECT_TRUE(device_matches(ordinal(0), memory_[0].get(), bytes, other_seed(1), 0, "copy_buffer from registered memory"));
}

TEST_P(GpuHostRegistrationBySize, GatherSlicesIntoRegisteredMemoryIsCorrect) {
  const std::size_t bytes = GetParam();
  DeviceMemory& src = register_pattern(0, bytes);
  std::vector<DeviceSlice> slices;
  const std::size_t half = bytes / 2;
  slices.push_back({0, src.get() + half, bytes - half});
  slices.push_back({0, src.get(), half});
  std::vector<std::byte> out(bytes, kPoison);
  const HostRegistration reg = register_host(out);
  ASSERT_EQ(xfer().gather_slices(slices, out), bytes);
  EXPECT_TRUE(host_matches(std::span(out).first(bytes - half), seed(0), half, "second half first"));
  EXPECT_TRUE(host_matches(std::span(out).subspan(bytes - half), seed(0), 0, "first half second"));
}

INSTANTIATE_TEST_SUITE_P(Bytes, GpuHostRegistrationBySize, ::testing::Values(1, 4095, kMiB + 7, 64 * kMiB),
                         size_param_name);

TEST_F(GpuHostRegistration, CudaHostAllocMemoryIsDirectWithoutARegistration) {
  const std::size_t bytes = 3 * kMiB + 1;
  register_pattern(0, bytes);
  const PinnedMemory out(bytes + 4096);
  std::fill(out.span().begin(), out.span().end(), kPoison);
  const std::size_t before = leases(manager().pinned_pool());
  (void)xfer().gather_into(out.span().subspan(1, bytes), std::nullopt);
  EXPECT_EQ(leases(manager().pinned_pool()), before) << "gather_into staged memory cudaHostAlloc made";
  EXPECT_TRUE(host_matches(out.span().subspan(1, bytes), seed(0), 0, "cudaHostAlloc output"));
  const std::vector<std::byte> data = pattern_bytes(bytes, other_seed(0));
  std::copy(data.begin(), data.end(), out.span().begin());
  xfer().broadcast(out.span().first(bytes));
  EXPECT_EQ(leases(manager().pinned_pool()), before) << "broadcast staged memory cudaHostAlloc made";
  EXPECT_TRUE(device_matches(ordinal(0), memory_[0].get(), bytes, other_seed(0), 0, "broadcast from cudaHostAlloc memory"));
}

TEST_F(GpuHostRegistration, ARegistrationThatEndsInsideTheRangeIsStaged) {
  const std::size_t bytes = 4 * kMiB + 3;
  register_pattern(0, bytes);
  const Pages out(2 * bytes / page() * page() + 2 * page());
  const HostRegistration first_part = register_host(out.span().first(page()));
  std::fill(out.span().begin(), out.span().end(), kPoison);
  const std::size_t before = leases(manager().pinned_pool());
  (void)xfer().gather_into(out.span().first(bytes), std::nullopt);
  EXPECT_GT(leases(manager().pinned_pool()), before) << "gather_into DMAed past the end of a registration";
  EXPECT_TRUE(host_matches(out.span().first(bytes), seed(0), 0, "partly registered output"));
}

TEST_F(GpuHostRegistration, OverlapsAreRefusedAndNeighboursAreNot) {
  const Pages pages(16 * page());
  const HostRegistration low = register_host(pages.span().first(8 * page()));
  EXPECT_TRUE(throws_error([&] { (void)register_host(pages.span().subspan(4 * page(), 8 * page())); },
                           Errc::invalid_argument, "overlaps the live registration"));
  EXPECT_TRUE(throws_error([&] { (void)register_host(pages.span().first(8 * page())); }, Errc::invalid_argument,
                           "overlaps"));
  const HostRegistration high = register_host(pages.span().subspan(8 * page()));
  EXPECT_EQ(high.size(), 8 * page());
}

TEST_F(GpuHostRegistration, PinnedMemoryIsRefusedWithTheReason) {
  const PinnedMemory pinned(kMiB);
  EXPECT_TRUE(throws_error([&] { (void)register_host(pinned.span()); }, Errc::invalid_argument, "already page-locked"));
}

TEST_F(GpuHostRegistration, ResetUnregistersAndMovesUnregisterOnce) {
  const std::size_t bytes = 2 * kMiB;
  register_pattern(0, bytes);
  const Pages out(bytes);
  HostRegistration reg = register_host(out.span());
  HostRegistration moved = std::move(reg);
  EXPECT_TRUE(reg.empty());  // NOLINT(bugprone-use-after-move): a moved-from registration is empty
  moved.reset();
  EXPECT_TRUE(moved.empty());
  const std::size_t before = leases(manager().pinned_pool());
  (void)xfer().gather_into(out.span());
  EXPECT_GT(leases(manager().pinned_pool()), before) << "memory stayed pinned after reset";
  EXPECT_TRUE(host_matches(out.span(), seed(0), 0, "after reset"));
  const HostRegistration again = register_host(out.span());
  EXPECT_EQ(again.data(), out.span().data());
}

}  // namespace
}  // namespace gpuxfer::test
