// Errc names, Error, LinkKind names and the version string.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include <gpuxfer/device_info.hpp>
#include <gpuxfer/error.hpp>
#include <gpuxfer/version.hpp>

namespace gpuxfer {
namespace {

TEST(Errc, EveryCodeHasItsName) {
  EXPECT_EQ(to_string(Errc::invalid_argument), "invalid_argument");
  EXPECT_EQ(to_string(Errc::invalid_buffer), "invalid_buffer");
  EXPECT_EQ(to_string(Errc::invalid_option), "invalid_option");
  EXPECT_EQ(to_string(Errc::no_device), "no_device");
  EXPECT_EQ(to_string(Errc::out_of_memory), "out_of_memory");
  EXPECT_EQ(to_string(Errc::unsupported), "unsupported");
  EXPECT_EQ(to_string(Errc::cuda_error), "cuda_error");
  EXPECT_EQ(to_string(Errc::nccl_error), "nccl_error");
  EXPECT_EQ(to_string(Errc::device_fault), "device_fault");
  EXPECT_EQ(to_string(Errc::comm_error), "comm_error");
}

TEST(Errc, UnknownValueStillGivesText) {
  const auto unknown = static_cast<Errc>(12345);
  EXPECT_FALSE(to_string(unknown).empty());
}

TEST(Error, CarriesCodeAndMessage) {
  const Error error(Errc::invalid_buffer, "device 3: no buffer registered");
  EXPECT_EQ(error.code(), Errc::invalid_buffer);
  EXPECT_EQ(error.message(), "device 3: no buffer registered");
  EXPECT_NE(std::string(error.what()).find("device 3: no buffer registered"), std::string::npos) << error.what();
  EXPECT_NE(std::string(error.what()).find("invalid_buffer"), std::string::npos) << "what() names the code: "
                                                                                  << error.what();
}

TEST(Error, IsARuntimeErrorAndCanBeCaughtAsOne) {
  try {
    throw Error(Errc::out_of_memory, "pinned pool limit of 1024 bytes reached");
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("1024"), std::string::npos) << e.what();
    const auto* error = dynamic_cast<const Error*>(&e);
    ASSERT_NE(error, nullptr);
    EXPECT_EQ(error->code(), Errc::out_of_memory);
    return;
  }
  FAIL() << "not caught as std::runtime_error";
}

TEST(Error, CopiesKeepTheCode) {
  const Error original(Errc::nccl_error, "ncclBroadcast failed");
  const Error copy = original;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_EQ(copy.code(), Errc::nccl_error);
  EXPECT_STREQ(copy.what(), original.what());
}

TEST(LinkKind, EveryKindHasItsName) {
  EXPECT_EQ(to_string(LinkKind::self), "self");
  EXPECT_EQ(to_string(LinkKind::nvlink), "nvlink");
  EXPECT_EQ(to_string(LinkKind::pcie_peer), "pcie_peer");
  EXPECT_EQ(to_string(LinkKind::host_staged), "host_staged");
}

TEST(Version, StringMatchesTheMacros) {
  const std::string expected = std::to_string(GPUXFER_VERSION_MAJOR) + "." + std::to_string(GPUXFER_VERSION_MINOR) +
                               "." + std::to_string(GPUXFER_VERSION_PATCH);
  EXPECT_EQ(std::string(version_string), expected);
}

}  // namespace
}  // namespace gpuxfer
