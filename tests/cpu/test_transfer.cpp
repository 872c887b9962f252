// InterGpuTransfer's argument checks, testable without a GPU: a null manager, and every function that
// takes a device index, given one past the end, throws Errc::invalid_buffer naming it. Handles.
#include <cstddef>
#include <vector>

#include <gtest/gtest.h>

#include <gpuxfer/inter_gpu_transfer.hpp>

#include "common/expect_error.hpp"

namespace gpuxfer {
namespace {

using test::throws_error;
using test::throws_error_naming;
using test::throws_error_naming_any;

std::shared_ptr<MultiGpuManager> any_manager() {
  Options opts;
  opts.min_devices = 0;
  return MultiGpuManager::create(opts);
}

TEST(Transfer, NullManagerIsInvalidArgument) {
  EXPECT_TRUE(throws_error([] { InterGpuTransfer xfer(nullptr); }, Errc::invalid_argument));
}

TEST(Transfer, KeepsItsManager) {
  const auto manager = any_manager();
  const InterGpuTransfer xfer(manager);
  EXPECT_EQ(xfer.manager(), manager);
}

// Runs on any machine: the index is past the end whatever the device count.
class TransferIndices : public ::testing::Test {
 protected:
  void SetUp() override {
    manager_ = any_manager();
    xfer_ = std::make_unique<InterGpuTransfer>(manager_);
    bad_ = manager_->device_count() + 7;
    other_ = manager_->device_count() + 12;
  }

  std::shared_ptr<MultiGpuManager> manager_;
  std::unique_ptr<InterGpuTransfer> xfer_;
  std::size_t bad_ = 0;
  std::size_t other_ = 0;  // a second bad index, for functions with two
  int host_word_ = 0;
  std::vector<std::byte> data_ = std::vector<std::byte>(64, std::byte{1});
};

TEST_F(TransferIndices, Registry) {
  EXPECT_TRUE(throws_error_naming([&] { xfer_->set_device_buffer(bad_, &host_word_, sizeof host_word_); },
                                  Errc::invalid_buffer, bad_));
  EXPECT_TRUE(throws_error_naming([&] { xfer_->set_device_buffer(bad_, &host_word_, sizeof host_word_, nullptr); },
                                  Errc::invalid_buffer, bad_));
  EXPECT_TRUE(throws_error_naming([&] { xfer_->clear_device_buffer(bad_); }, Errc::invalid_buffer, bad_));
  EXPECT_TRUE(throws_error_naming([&] { (void)xfer_->device_buffer(bad_); }, Errc::invalid_buffer, bad_));
}

TEST_F(TransferIndices, CopyBuffer) {
  EXPECT_TRUE(throws_error_naming_any([&] { xfer_->copy_buffer(bad_, other_, data_); }, Errc::invalid_buffer,
                                      {bad_, other_}));
  if (manager_->device_count() > 0) {
    EXPECT_TRUE(throws_error_naming([&] { xfer_->copy_buffer(0, bad_, data_); }, Errc::invalid_buffer, bad_));
    EXPECT_TRUE(throws_error_naming([&] { xfer_->copy_buffer(bad_, 0, data_); }, Errc::invalid_buffer, bad_));
  }
}

TEST_F(TransferIndices, CopyDeviceBuffer) {
  for (const CopyPath path : {CopyPath::automatic, CopyPath::peer, CopyPath::staged}) {
    EXPECT_TRUE(throws_error_naming_any([&] { xfer_->copy_device_buffer(bad_, other_, path); }, Errc::invalid_buffer,
                                        {bad_, other_}));
    EXPECT_TRUE(throws_error_naming_any([&] { (void)xfer_->copy_device_buffer_async(bad_, other_, path); },
                                        Errc::invalid_buffer, {bad_, other_}));
    if (manager_->device_count() > 0) {
      EXPECT_TRUE(throws_error_naming([&] { xfer_->copy_device_buffer(0, bad_, path); }, Errc::invalid_buffer, bad_));
      EXPECT_TRUE(throws_error_naming([&] { xfer_->copy_device_buffer(bad_, 0, path); }, Errc::invalid_buffer, bad_));
    }
  }
}

TEST_F(TransferIndices, BroadcastFromDevice) {
  for (const DeviceBroadcastPath path : {DeviceBroadcastPath::automatic, DeviceBroadcastPath::nccl,
                                         DeviceBroadcastPath::peer}) {
    EXPECT_TRUE(throws_error_naming([&] { xfer_->broadcast_from_device(bad_, path); }, Errc::invalid_buffer, bad_));
  }
}

TEST_F(TransferIndices, Gather) {
  EXPECT_TRUE(throws_error_naming([&] { (void)xfer_->gather(bad_); }, Errc::invalid_buffer, bad_));
  EXPECT_TRUE(throws_error_naming([&] { (void)xfer_->gather_blocking(bad_); }, Errc::invalid_buffer, bad_));
  EXPECT_TRUE(throws_error_naming([&] { (void)xfer_->gather_to_device(bad_, &host_word_, sizeof host_word_); },
                                  Errc::invalid_buffer, bad_));
}

TEST_F(TransferIndices, StreamOrderedForms) {
  const cudaStream_t stream = nullptr;  // never reached: the index is checked first
  const std::vector<cudaStream_t> streams(manager_->device_count(), nullptr);
  EXPECT_TRUE(throws_error_naming([&] { (void)xfer_->gather_async(bad_, stream); }, Errc::invalid_buffer, bad_));
  EXPECT_TRUE(throws_error_naming([&] { (void)xfer_->gather_async(bad_, streams); }, Errc::invalid_buffer, bad_));
  EXPECT_TRUE(throws_error_naming([&] { (void)xfer_->gather_to_device_async(bad_, &host_word_, sizeof host_word_, stream); },
                                  Errc::invalid_buffer, bad_));
  EXPECT_TRUE(throws_error_naming_any([&] { xfer_->copy_buffer_async(bad_, other_, data_, stream); },
                                      Errc::invalid_buffer, {bad_, other_}));
  EXPECT_TRUE(throws_error_naming_any([&] { (void)xfer_->copy_device_buffer_async(bad_, other_, stream); },
                                      Errc::invalid_buffer, {bad_, other_}));
  EXPECT_TRUE(throws_error_naming([&] { xfer_->broadcast_from_device_async(bad_, stream); }, Errc::invalid_buffer, bad_));
}

// With no device at all, the functions without an index have nothing to do.
TEST(TransferWithoutDevices, GatherAllAndGatherIntoAreEmpty) {
  const auto manager = any_manager();
  if (manager->device_count() != 0) GTEST_SKIP() << "this machine has a GPU";
  InterGpuTransfer xfer(manager);
  EXPECT_TRUE(xfer.gather_all().empty());
  std::vector<std::byte> out(16, std::byte{0xA5});
  EXPECT_TRUE(xfer.gather_into(out).empty());
  for (const std::byte b : out) EXPECT_EQ(b, std::byte{0xA5});
}

// One stream per device means as many streams as devices.
TEST(TransferWithoutDevices, PerDeviceStreamsAreOnePerDevice) {
  const auto manager = any_manager();
  if (manager->device_count() != 0) GTEST_SKIP() << "this machine has a GPU";
  InterGpuTransfer xfer(manager);
  const std::vector<cudaStream_t> one(1, nullptr);
  EXPECT_TRUE(throws_error([&] { (void)xfer.gather_all_async(one); }, Errc::invalid_argument,
                           "1 streams for 0 devices (one per device)"));
}

TEST(Handles, DefaultHandlesHaveNothingToWaitFor) {
  TransferHandle transfer;
  EXPECT_TRUE(transfer.ready());
  transfer.wait();
  GatherHandle gather;
  EXPECT_TRUE(gather.ready());
  EXPECT_TRUE(gather.get().empty());
  TransferHandle moved(std::move(transfer));
  EXPECT_TRUE(moved.ready());
  moved.stream_wait(nullptr);  // nothing to wait for: no CUDA call
  gather.stream_wait(nullptr);
}

}  // namespace
}  // namespace gpuxfer
