// NUMA placement on a real host: staging leased on a node has every page there (move_pages), and with
// Options::numa = on every pageable path, whose staging and copy threads are then placed on the device's
// node, still delivers every byte. The one-node runner checks the mechanism; a two-node host the benefit.
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

// The NUMA node of the page at @p p (move_pages without a target node only reports), or a negative errno.
int node_of_page(const void* p) {
  void* pages[1] = {const_cast<void*>(p)};
  int status[1] = {-1};
  if (syscall(SYS_move_pages, 0, 1, pages, nullptr, status, 0) != 0) return -errno;
  return status[0];
}

class GpuNuma : public SmallChunks<GpuTest> {
 protected:
  [[nodiscard]] Options options() const override {
    Options opts = SmallChunks<GpuTest>::options();
    opts.numa = NumaPlacement::on;
    return opts;
  }
  // The node this test expects staging on: the device's, which sysfs knows on any Linux host with one.
  [[nodiscard]] int node() const { return manager_->device(0).numa_node; }
};

TEST_F(GpuNuma, DevicesStageOnTheirOwnNode) {
  if (node() < 0) GTEST_SKIP() << "sysfs gives device 0 no NUMA node";
  for (std::size_t i = 0; i < device_count(); ++i) {
    const DeviceInfo& d = manager().device(i);
    EXPECT_EQ(d.staging_node, d.numa_node) << "device " << i;
    EXPECT_FALSE(d.numa_cpus.empty()) << "device " << i << " on node " << d.numa_node;
  }
}

TEST_F(GpuNuma, EveryPageOfANodeLeaseIsOnThatNode) {
  if (node() < 0) GTEST_SKIP() << "sysfs gives device 0 no NUMA node";
  const std::size_t bytes = 64 * kMiB + 4096;
  HostBuffer block = manager().pinned_pool().acquire(bytes, node());
  ASSERT_EQ(block.size(), bytes);
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::size_t pages = 0;
  std::size_t elsewhere = 0;
  int first_wrong = 0;
  for (std::size_t at = 0; at < bytes; at += page, ++pages) {
    const int where = node_of_page(block.data() + at);
    if (where != node()) {
      if (elsewhere++ == 0) first_wrong = where;
    }
  }
  std::printf("[ numa     ] pinned block of %zu pages on node %d: %zu on that node, %zu elsewhere\n", pages, node(),
              pages - elsewhere, elsewhere);
  EXPECT_EQ(elsewhere, 0u) << "first page elsewhere reported " << first_wrong;
  // The block DMAs like any pinned memory.
  register_pattern(0, bytes);
  std::fill(block.span().begin(), block.span().end(), kPoison);
  const std::vector<GatherPiece> pieces = xfer().gather_into(block.span());
  EXPECT_TRUE(pieces_are_concatenation(pieces, {{0, 0, bytes}}));
  EXPECT_TRUE(host_matches(block.span().first(bytes), seed(0), 0, "gather_into a node lease"));
}

TEST_F(GpuNuma, PageablePathsDeliverEveryByte) {
  const std::size_t bytes = 5 * kMiB + 3;
  for (std::size_t i = 0; i < device_count(); ++i) register_pattern(i, bytes);
  std::vector<std::byte> out(bytes * device_count(), kPoison);
  const std::vector<GatherPiece> pieces = xfer().gather_into(out);
  EXPECT_TRUE(gathered_every_device(pieces, out, bytes, "pageable gather_into"));
  const std::vector<std::byte> data = pattern_bytes(bytes, other_seed(0));
  xfer().broadcast(data);
  for (std::size_t i = 0; i < device_count(); ++i) {
    EXPECT_TRUE(device_matches(ordinal(i), memory_[i].get(), bytes, other_seed(0), 0, "pageable broadcast"));
  }
  std::vector<std::byte> slices_out(bytes, kPoison);
  const DeviceSlice slice{0, memory_[0].get(), bytes};
  ASSERT_EQ(xfer().gather_slices(std::span(&slice, 1), slices_out), bytes);
  EXPECT_TRUE(host_matches(slices_out, other_seed(0), 0, "pageable gather_slices"));
  // New bytes on every device first: gather_slices left the broadcast's in a pool block of this size.
  for (std::size_t i = 0; i < device_count(); ++i)
    fill_device(ordinal(i), memory_[i].get(), bytes, other_seed(1 + i));
  {
    const std::vector<HostBuffer> all = xfer().gather_all();
    ASSERT_EQ(all.size(), device_count());
    for (std::size_t i = 0; i < all.size(); ++i) {
      EXPECT_EQ(all[i].size(), bytes) << "gather_all into node leases, device " << i;
      EXPECT_TRUE(host_matches(all[i].span(), other_seed(1 + i), 0,
                               "gather_all into node leases, device " + std::to_string(i)));
    }
  }
  EXPECT_EQ(manager().pinned_pool().stats().in_use, 0u);
}

}  // namespace
}  // namespace gpuxfer::test
