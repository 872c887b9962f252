// apply_env with a fake environment, for every GPUXFER_* variable: good values land in their field,
// bad ones throw Errc::invalid_option naming the variable and the value. from_env reads the process.
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include <gpuxfer/options.hpp>

#include "common/env.hpp"
#include "common/expect_error.hpp"
#include "runtime/log.hpp"

namespace gpuxfer {
namespace {

using test::FakeEnv;
using test::ScopedEnv;
using test::throws_error;

const std::set<std::string> kVariables = {
    "GPUXFER_DEVICES",      "GPUXFER_MIN_DEVICES", "GPUXFER_PEER_ACCESS",
    "GPUXFER_NCCL",         "GPUXFER_POOL_LIMIT",  "GPUXFER_CHUNK_BYTES",
    "GPUXFER_HOST_THREADS", "GPUXFER_NUMA",        "GPUXFER_CAPTURE_KERNELS",
    "GPUXFER_SIMULATED_DEVICES", "GPUXFER_POOL_RESERVE"};

Options apply(const std::map<std::string, std::string>& values, Options base = {}) {
  FakeEnv env(values);
  return apply_env(std::move(base), env.lookup());
}

// apply() must throw invalid_option naming the variable and the bad value.
::testing::AssertionResult rejects(const std::string& name, const std::string& value) {
  return throws_error([&] { (void)apply({{name, value}}); }, Errc::invalid_option, name, value);
}

TEST(ApplyEnv, EmptyEnvironmentKeepsTheBaseAndAsksForEveryVariable) {
  Options base;
  base.min_devices = 0;
  base.chunk_bytes = std::size_t{1} << 20;
  base.devices = {1};
  FakeEnv env({});
  const Options opts = apply_env(base, env.lookup());
  EXPECT_EQ(opts.min_devices, 0);
  EXPECT_EQ(opts.chunk_bytes, std::size_t{1} << 20);
  EXPECT_EQ(opts.devices, std::vector<int>{1});
  EXPECT_EQ(opts.host_threads, base.host_threads);
  for (const std::string& name : kVariables) EXPECT_TRUE(env.asked().count(name)) << name << " never looked up";
  for (const std::string& name : env.asked()) EXPECT_EQ(name.rfind("GPUXFER_", 0), 0u) << "looked up " << name;
}

TEST(ApplyEnv, Devices) {
  EXPECT_EQ(apply({{"GPUXFER_DEVICES", "0,1"}}).devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(apply({{"GPUXFER_DEVICES", "2"}}).devices, (std::vector<int>{2}));
  EXPECT_TRUE(rejects("GPUXFER_DEVICES", "0,x"));
  EXPECT_TRUE(rejects("GPUXFER_DEVICES", "-1"));
  EXPECT_TRUE(rejects("GPUXFER_DEVICES", "0,,1"));
  EXPECT_TRUE(rejects("GPUXFER_DEVICES", "1,1")) << "duplicates are out of range for the field";
}

TEST(ApplyEnv, MinDevices) {
  EXPECT_EQ(apply({{"GPUXFER_MIN_DEVICES", "0"}}).min_devices, 0);
  EXPECT_EQ(apply({{"GPUXFER_MIN_DEVICES", "2"}}).min_devices, 2);
  EXPECT_TRUE(rejects("GPUXFER_MIN_DEVICES", "-1"));
  EXPECT_TRUE(rejects("GPUXFER_MIN_DEVICES", "two"));
  EXPECT_TRUE(rejects("GPUXFER_MIN_DEVICES", ""));
  EXPECT_TRUE(rejects("GPUXFER_MIN_DEVICES", "99999999999999999999"));
}

TEST(ApplyEnv, PeerAccess) {
  EXPECT_FALSE(apply({{"GPUXFER_PEER_ACCESS", "0"}}).enable_peer_access);
  EXPECT_FALSE(apply({{"GPUXFER_PEER_ACCESS", "off"}}).enable_peer_access);
  Options off;
  off.enable_peer_access = false;
  EXPECT_TRUE(apply({{"GPUXFER_PEER_ACCESS", "1"}}, off).enable_peer_access);
  EXPECT_TRUE(apply({{"GPUXFER_PEER_ACCESS", "ON"}}, off).enable_peer_access);
  EXPECT_TRUE(rejects("GPUXFER_PEER_ACCESS", "maybe"));
  EXPECT_TRUE(rejects("GPUXFER_PEER_ACCESS", "2"));
}

TEST(ApplyEnv, Nccl) {
  EXPECT_FALSE(apply({{"GPUXFER_NCCL", "0"}}).enable_nccl);
  Options off;
  off.enable_nccl = false;
  EXPECT_TRUE(apply({{"GPUXFER_NCCL", "1"}}, off).enable_nccl);
  EXPECT_TRUE(rejects("GPUXFER_NCCL", "2"));
  EXPECT_TRUE(rejects("GPUXFER_NCCL", "nccl"));
  EXPECT_FALSE(apply({{"GPUXFER_CAPTURE_KERNELS", "off"}}).capture_copy_kernels);
  Options no_kernels;
  no_kernels.capture_copy_kernels = false;
  EXPECT_TRUE(apply({{"GPUXFER_CAPTURE_KERNELS", "1"}}, no_kernels).capture_copy_kernels);
  EXPECT_TRUE(rejects("GPUXFER_CAPTURE_KERNELS", "kernels"));
}

TEST(ApplyEnv, SimulatedDevices) {
  EXPECT_EQ(apply({}).simulated_devices, 0u);
  EXPECT_EQ(apply({{"GPUXFER_SIMULATED_DEVICES", "4"}}).simulated_devices, 4u);
  EXPECT_EQ(apply({{"GPUXFER_SIMULATED_DEVICES", " 64 "}}).simulated_devices, 64u);
  Options four;
  four.simulated_devices = 4;
  EXPECT_EQ(apply({{"GPUXFER_SIMULATED_DEVICES", "0"}}, four).simulated_devices, 0u);
  EXPECT_TRUE(rejects("GPUXFER_SIMULATED_DEVICES", "65"));
  EXPECT_TRUE(rejects("GPUXFER_SIMULATED_DEVICES", "-2"));
  EXPECT_TRUE(rejects("GPUXFER_SIMULATED_DEVICES", "two"));
  EXPECT_TRUE(rejects("GPUXFER_SIMULATED_DEVICES", ""));
}

TEST(ApplyEnv, PoolReserve) {
  EXPECT_EQ(apply({{"GPUXFER_POOL_RESERVE", "2x256MiB"}}).pool_reserve,
            (std::vector<std::size_t>{std::size_t{256} << 20, std::size_t{256} << 20}));
  EXPECT_TRUE(rejects("GPUXFER_POOL_RESERVE", "two"));
  EXPECT_TRUE(rejects("GPUXFER_POOL_RESERVE", "2x"));
  EXPECT_TRUE(rejects("GPUXFER_POOL_RESERVE", "100x1GiB"));  // more than the pool's limit
}

TEST(ApplyEnv, PoolLimit) {
  EXPECT_EQ(apply({{"GPUXFER_POOL_LIMIT", "4GiB"}}).pool_limit_bytes, std::size_t{4} << 30);
  EXPECT_EQ(apply({{"GPUXFER_POOL_LIMIT", "512M"}}).pool_limit_bytes, std::size_t{512} << 20);
  Options small_chunks;
  small_chunks.chunk_bytes = 4096;
  EXPECT_EQ(apply({{"GPUXFER_POOL_LIMIT", "1048576"}}, small_chunks).pool_limit_bytes, std::size_t{1} << 20);
  EXPECT_TRUE(rejects("GPUXFER_POOL_LIMIT", "lots"));
  EXPECT_TRUE(rejects("GPUXFER_POOL_LIMIT", "4X"));
  EXPECT_TRUE(rejects("GPUXFER_POOL_LIMIT", "99999999999T"));
}

TEST(ApplyEnv, ChunkBytes) {
  EXPECT_EQ(apply({{"GPUXFER_CHUNK_BYTES", "8MiB"}}).chunk_bytes, std::size_t{8} << 20);
  EXPECT_EQ(apply({{"GPUXFER_CHUNK_BYTES", "64K"}}).chunk_bytes, std::size_t{64} << 10);
  EXPECT_TRUE(rejects("GPUXFER_CHUNK_BYTES", "0"));
  EXPECT_TRUE(rejects("GPUXFER_CHUNK_BYTES", "big"));
}

TEST(ApplyEnv, HostThreads) {
  EXPECT_EQ(apply({{"GPUXFER_HOST_THREADS", "8"}}).host_threads, 8u);
  EXPECT_EQ(apply({{"GPUXFER_HOST_THREADS", "1"}}).host_threads, 1u);
  EXPECT_EQ(apply({{"GPUXFER_HOST_THREADS", "256"}}).host_threads, 256u);
  EXPECT_TRUE(rejects("GPUXFER_HOST_THREADS", "0"));
  EXPECT_TRUE(rejects("GPUXFER_HOST_THREADS", "257"));
  EXPECT_TRUE(rejects("GPUXFER_HOST_THREADS", "-3"));
  EXPECT_TRUE(rejects("GPUXFER_HOST_THREADS", "x"));
  EXPECT_TRUE(rejects("GPUXFER_HOST_THREADS", "4294967297")) << "2^32 + 1 must not wrap to 1";
}

TEST(ApplyEnv, SeveralVariablesTogether) {
  const Options opts = apply({{"GPUXFER_MIN_DEVICES", "0"},
                              {"GPUXFER_CHUNK_BYTES", "2M"},
                              {"GPUXFER_POOL_LIMIT", "8M"},
                              {"GPUXFER_HOST_THREADS", "3"},
                              {"GPUXFER_PEER_ACCESS", "no"},
                              {"GPUXFER_NCCL", "false"},
                              {"GPUXFER_DEVICES", "1,0"}});
  EXPECT_EQ(opts.min_devices, 0);
  EXPECT_EQ(opts.chunk_bytes, std::size_t{2} << 20);
  EXPECT_EQ(opts.pool_limit_bytes, std::size_t{8} << 20);
  EXPECT_EQ(opts.host_threads, 3u);
  EXPECT_FALSE(opts.enable_peer_access);
  EXPECT_FALSE(opts.enable_nccl);
  EXPECT_EQ(opts.devices, (std::vector<int>{1, 0}));
}

TEST(ApplyEnv, PoolLimitBelowTheChunkFromTheEnvironmentIsRejected) {
  EXPECT_TRUE(throws_error([] { (void)apply({{"GPUXFER_CHUNK_BYTES", "8M"}, {"GPUXFER_POOL_LIMIT", "4M"}}); },
                           Errc::invalid_option));
}

TEST(FromEnv, ReadsTheProcessEnvironment) {
  const ScopedEnv threads("GPUXFER_HOST_THREADS", "3");
  const ScopedEnv min_devices("GPUXFER_MIN_DEVICES", "0");
  const Options opts = Options::from_env();
  EXPECT_EQ(opts.host_threads, 3u);
  EXPECT_EQ(opts.min_devices, 0);
}

TEST(FromEnv, BadValueNamesTheVariable) {
  const ScopedEnv threads("GPUXFER_HOST_THREADS", "lots");
  EXPECT_TRUE(throws_error([] { (void)Options::from_env(); }, Errc::invalid_option, "GPUXFER_HOST_THREADS", "lots"));
}

}  // namespace
// GPUXFER_LOG_LEVEL in any case, "warning" as warn; anything else is no level (warned about once, and
// warn used, where the logger reads it).
TEST(LogLevel, AnyCaseIsALevelAndOtherTextIsNone) {
  using detail::LogLevel;
  EXPECT_EQ(detail::parse_log_level("debug"), LogLevel::debug);
  EXPECT_EQ(detail::parse_log_level("INFO"), LogLevel::info);
  EXPECT_EQ(detail::parse_log_level("Warning"), LogLevel::warn);
  EXPECT_EQ(detail::parse_log_level("warn"), LogLevel::warn);
  EXPECT_EQ(detail::parse_log_level("ERROR"), LogLevel::error);
  for (const char* bad : {"", "bogus", "3", "info ", "verbose"}) {
    EXPECT_FALSE(detail::parse_log_level(bad).has_value()) << "'" << bad << "'";
  }
}

}  // namespace gpuxfer
