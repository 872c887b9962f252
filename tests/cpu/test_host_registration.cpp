// register_host without a GPU: the argument checks, the empty registration, and the CUDA reason when
// nothing can be page-locked.
#include <cstddef>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <gpuxfer/gpuxfer.hpp>

#include "common/expect_error.hpp"

namespace gpuxfer::test {
namespace {

TEST(CpuHostRegistration, AnEmptySpanGivesAnEmptyRegistration) {
  const HostRegistration none = register_host({});
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(none.size(), 0u);
}

TEST(CpuHostRegistration, ANullSpanWithBytesIsRefused) {
  EXPECT_TRUE(throws_error([] { (void)register_host(std::span<std::byte>(static_cast<std::byte*>(nullptr), 16)); },
                           Errc::invalid_argument, "null", "16 bytes"));
}

TEST(CpuHostRegistration, ADefaultRegistrationResetsAndMovesSafely) {
  HostRegistration a;
  a.reset();
  HostRegistration b(std::move(a));
  a = std::move(b);
  EXPECT_TRUE(a.empty());
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move): a moved-from registration is empty
}

TEST(CpuHostRegistration, WithoutADriverRegistrationFailsWithNoDevice) {
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) GTEST_SKIP() << "this machine has a GPU";
  (void)cudaGetLastError();
  std::vector<std::byte> memory(4096);
  EXPECT_TRUE(throws_error([&] { (void)register_host(memory); }, Errc::no_device, "register_host", "4096 bytes"));
}

}  // namespace
}  // namespace gpuxfer::test
