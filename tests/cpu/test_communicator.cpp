// Communicator's creation without a GPU: arguments refused before any CUDA call or rendezvous, and, on a
// machine without CUDA, Errc::no_device naming CUDA's reason (skipped, saying so, where a GPU is present).
#include <chrono>
#include <string>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <gpuxfer/communicator.hpp>

#include "common/env.hpp"
#include "common/expect_error.hpp"

namespace gpuxfer {
namespace {

using test::ScopedEnv;
using test::throws_error;

TEST(Communicator, RefusesAWorldSizeBelowOne) {
  EXPECT_TRUE(throws_error([] { Communicator(0, 0, ""); }, Errc::invalid_argument, "world_size is 0"));
}

TEST(Communicator, RefusesARankOutsideTheWorld) {
  EXPECT_TRUE(throws_error([] { Communicator(2, 2, "tcp://127.0.0.1:1"); }, Errc::invalid_argument,
                           "rank 2 is out of range", "ranks 0 to 1"));
  EXPECT_TRUE(throws_error([] { Communicator(-1, 2, "tcp://127.0.0.1:1"); }, Errc::invalid_argument,
                           "rank -1 is out of range"));
}

TEST(Communicator, RefusesSeveralRanksWithoutAnAddress) {
  EXPECT_TRUE(throws_error([] { Communicator(0, 2, ""); }, Errc::invalid_option,
                           "a world of 2 ranks needs an init_address", "tcp://"));
}

TEST(Communicator, RefusesABadAddress) {
  EXPECT_TRUE(throws_error([] { Communicator(0, 2, "http://host:1"); }, Errc::invalid_option,
                           "init_address", "http://host:1"));
}

TEST(Communicator, RefusesANegativeDeviceAndTimeout) {
  CommunicatorOptions device;
  device.device = -1;
  EXPECT_TRUE(throws_error([&] { Communicator(0, 1, "", device); }, Errc::invalid_argument,
                           "CommunicatorOptions::device is -1"));
  CommunicatorOptions timeout;
  timeout.timeout = std::chrono::milliseconds(0);
  EXPECT_TRUE(throws_error([&] { Communicator(0, 1, "", timeout); }, Errc::invalid_argument,
                           "CommunicatorOptions::timeout is 0 ms"));
}

TEST(Communicator, FromTheEnvironmentRefusesBadVariables) {
  const ScopedEnv rank("GPUXFER_RANK", "3");
  const ScopedEnv world("GPUXFER_WORLD_SIZE", "2");
  EXPECT_TRUE(throws_error([] { (void)Communicator::from_environment(); }, Errc::invalid_option,
                           "GPUXFER_RANK='3'", "out of range"));
}

TEST(Communicator, FromTheEnvironmentRefusesABadTimeout) {
  const ScopedEnv timeout("GPUXFER_TIMEOUT", "soon");
  EXPECT_TRUE(throws_error([] { (void)Communicator::from_environment(); }, Errc::invalid_option,
                           "GPUXFER_TIMEOUT='soon'"));
}

TEST(Communicator, RefusesABadNodeIdBeforeCuda) {
  const ScopedEnv node_id("GPUXFER_NODE_ID", "two words");
  EXPECT_TRUE(throws_error([] { Communicator(0, 1, ""); }, Errc::invalid_option, "GPUXFER_NODE_ID='two words'"));
}

TEST(Communicator, FromAnExchangeRefusesBadArgumentsBeforeCallingIt) {
  int calls = 0;
  const Communicator::BlobExchange counting = [&](const std::string& blob) {
    ++calls;
    return blob;
  };
  EXPECT_TRUE(throws_error([&] { (void)Communicator::from_exchange(0, 0, 0, counting); }, Errc::invalid_argument,
                           "world_size is 0"));
  EXPECT_TRUE(throws_error([&] { (void)Communicator::from_exchange(3, 3, 0, counting); }, Errc::invalid_argument,
                           "rank 3 is out of range"));
  EXPECT_TRUE(throws_error([&] { (void)Communicator::from_exchange(0, 2, -1, counting); }, Errc::invalid_argument,
                           "local_rank is -1"));
  EXPECT_TRUE(throws_error([] { (void)Communicator::from_exchange(0, 2, 0, Communicator::BlobExchange{}); },
                           Errc::invalid_argument, "needs an exchange function"));
  CommunicatorOptions device;
  device.device = -2;
  EXPECT_TRUE(throws_error([&] { (void)Communicator::from_exchange(0, 2, 0, counting, device); },
                           Errc::invalid_argument, "CommunicatorOptions::device is -2"));
  EXPECT_EQ(calls, 0);
}

TEST(Communicator, WithoutAGpuCreationNamesTheCudaReason) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) GTEST_SKIP() << "a GPU is visible: the no-device path cannot be reached";
  const std::string reason = status != cudaSuccess ? cudaGetErrorName(status) : "0 devices";
  EXPECT_TRUE(throws_error([] { Communicator(0, 1, ""); }, Errc::no_device,
                           "rank 0 of 1: no CUDA device (cudaGetDeviceCount: ", reason));
  EXPECT_TRUE(throws_error([] { (void)Communicator::from_environment(); }, Errc::no_device, reason));
  // The device is chosen before the exchange: a rank without one never calls it.
  int calls = 0;
  EXPECT_TRUE(throws_error(
      [&] {
        (void)Communicator::from_exchange(1, 2, 0, [&](const std::string& blob) {
          ++calls;
          return blob;
        });
      },
      Errc::no_device, "rank 1 of 2: no CUDA device"));
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace gpuxfer
