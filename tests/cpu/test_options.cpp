// Options: the documented defaults, and validate() for every out-of-range field.
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <gpuxfer/options.hpp>

#include "common/expect_error.hpp"

namespace gpuxfer {
namespace {

using test::throws_error;

TEST(Options, Defaults) {
  const Options opts;
  EXPECT_TRUE(opts.devices.empty());
  EXPECT_EQ(opts.min_devices, 1);
  EXPECT_TRUE(opts.enable_peer_access);
  EXPECT_TRUE(opts.enable_nccl);
  EXPECT_EQ(opts.pool_limit_bytes, std::size_t{16} << 30);
  EXPECT_EQ(opts.chunk_bytes, std::size_t{8} << 20);
  EXPECT_EQ(opts.host_threads, default_host_threads());
  EXPECT_TRUE(opts.capture_copy_kernels);
  EXPECT_EQ(opts.simulated_devices, 0u);
  EXPECT_NO_THROW(opts.validate());
}

TEST(Options, PoolReserveListsParse) {
  const std::size_t mib = std::size_t{1} << 20;
  EXPECT_EQ(parse_size_list("2x256MiB,64M"), (std::vector<std::size_t>{256 * mib, 256 * mib, 64 * mib}));
  EXPECT_EQ(parse_size_list(" 1MiB "), (std::vector<std::size_t>{mib}));
  EXPECT_EQ(parse_size_list("3X4K"), (std::vector<std::size_t>{4096, 4096, 4096}));
  EXPECT_TRUE(parse_size_list("").empty());
  EXPECT_TRUE(parse_size_list("0x1M").empty());
  for (const char* bad : {"x1M", "2x", "1M,,2M", "-1x1M", "2y1M", "1025x1K"}) {
    EXPECT_TRUE(throws_error([&] { (void)parse_size_list(bad); }, Errc::invalid_option)) << bad;
  }
}

TEST(Options, PoolReserveAboveThePoolLimitIsRejected) {
  Options opts;
  opts.pool_limit_bytes = std::size_t{64} << 20;
  opts.pool_reserve = {std::size_t{32} << 20, std::size_t{32} << 20};
  EXPECT_NO_THROW(opts.validate());
  opts.pool_reserve.push_back(1);
  EXPECT_TRUE(throws_error([&] { opts.validate(); }, Errc::invalid_option, "pool_reserve"));
  opts.pool_reserve = {0};
  EXPECT_TRUE(throws_error([&] { opts.validate(); }, Errc::invalid_option, "pool_reserve"));
}

TEST(Options, SimulatedDevicesUpToTheMaximum) {
  Options opts;
  opts.simulated_devices = Options::max_simulated_devices;
  EXPECT_NO_THROW(opts.validate());
  opts.simulated_devices = Options::max_simulated_devices + 1;
  EXPECT_TRUE(throws_error([&] { opts.validate(); }, Errc::invalid_option, "simulated_devices"));
}

TEST(Options, DefaultHostThreadsAreHalfTheCoresWithinOneToSixteen) {
  const unsigned threads = default_host_threads();
  EXPECT_GE(threads, 1u);
  EXPECT_LE(threads, 16u);
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores >= 2 && cores <= 32) {
    EXPECT_EQ(threads, cores / 2);
  }
}

TEST(Options, BoundaryValuesAreValid) {
  Options opts;
  opts.min_devices = 0;
  opts.chunk_bytes = 4096;
  opts.pool_limit_bytes = Options::min_pool_chunks * 4096;  // just the chunks a pipeline holds
  opts.host_threads = 1;
  EXPECT_NO_THROW(opts.validate());
  opts.host_threads = 256;
  EXPECT_NO_THROW(opts.validate());
  opts.devices = {3, 0, 1};
  EXPECT_NO_THROW(opts.validate()) << "any order, no duplicates";
}

TEST(Options, NegativeMinDevicesIsRejected) {
  Options opts;
  opts.min_devices = -1;
  EXPECT_TRUE(throws_error([&] { opts.validate(); }, Errc::invalid_option, "min_devices"));
}

TEST(Options, ZeroChunkIsRejected) {
  Options opts;
  opts.chunk_bytes = 0;
  EXPECT_TRUE(throws_error([&] { opts.validate(); }, Errc::invalid_option, "chunk_bytes"));
}

TEST(Options, PoolLimitBelowOneChunkIsRejected) {
  Options opts;
  opts.chunk_bytes = std::size_t{8} << 20;
  opts.pool_limit_bytes = opts.chunk_bytes - 1;
  EXPECT_TRUE(throws_error([&] { opts.validate(); }, Errc::invalid_option, "pool_limit_bytes"));
}

// A pageable broadcast keeps 4 chunks in flight and a staged copy 3: a limit that holds fewer would fail
// every such operation with out_of_memory, so it is refused up front (issue 10 (h)).
TEST(Options, PoolLimitBelowThePipelinesChunksIsRejected) {
  Options opts;
  opts.chunk_bytes = std::size_t{8} << 20;
  for (const std::size_t chunks : {1, 2, 3}) {
    opts.pool_limit_bytes = chunks * opts.chunk_bytes;
    EXPECT_TRUE(throws_error([&] { opts.validate(); }, Errc::invalid_option, "pool_limit_bytes",
                             "4 x chunk_bytes"))
        << chunks << " chunks";
  }
  opts.pool_limit_bytes = 4 * opts.chunk_bytes;
  EXPECT_NO_THROW(opts.validate());
}

TEST(Options, HostThreadsOutOfRangeAreRejected) {
  Options opts;
  opts.host_threads = 0;
  EXPECT_TRUE(throws_error([&] { opts.validate(); }, Errc::invalid_option, "host_threads"));
  opts.host_threads = 257;
  EXPECT_TRUE(throws_error([&] { opts.validate(); }, Errc::invalid_option, "host_threads"));
}

TEST(Options, DuplicateDeviceIsRejected) {
  Options opts;
  opts.devices = {0, 1, 0};
  EXPECT_TRUE(throws_error([&] { opts.validate(); }, Errc::invalid_option, "devices"));
}

TEST(Options, NegativeDeviceIsRejected) {
  Options opts;
  opts.devices = {0, -1};
  EXPECT_TRUE(throws_error([&] { opts.validate(); }, Errc::invalid_option, "devices"));
}

}  // namespace
}  // namespace gpuxfer
