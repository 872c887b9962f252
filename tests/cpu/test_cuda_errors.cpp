// What a CUDA failure tells a person: without a driver, that none is loaded and what to check; never the
// directories of the machine that built the library.
#include <cstddef>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/host_registration.hpp>
#include <gpuxfer/multi_gpu_manager.hpp>

#include "runtime/cuda_check.hpp"

namespace gpuxfer {
namespace {

// True where CUDA found no driver at all (this is the CPU machine's case).
bool no_driver_loaded() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaErrorInsufficientDriver) return false;
  (void)cudaGetLastError();
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (driver != nullptr) dlclose(driver);
  return driver == nullptr;
}

std::string message_of_create() {
  Options opts;
  opts.min_devices = 1;
  try {
    (void)MultiGpuManager::create(opts);
  } catch (const Error& e) {
    return e.message();
  }
  return {};
}

TEST(CudaErrors, WithoutADriverTheManagerSaysNoneIsLoadedAndWhatToCheck) {
  if (!no_driver_loaded()) GTEST_SKIP() << "an NVIDIA driver is loaded on this machine";
  const std::string message = message_of_create();
  EXPECT_NE(message.find("no NVIDIA driver is loaded"), std::string::npos) << message;
  EXPECT_NE(message.find("nvidia-smi"), std::string::npos) << message;
  EXPECT_EQ(message.find("driver version is insufficient"), std::string::npos) << message;
}

TEST(CudaErrors, WithoutADriverRegisterHostSaysSoWithoutABuildPath) {
  if (!no_driver_loaded()) GTEST_SKIP() << "an NVIDIA driver is loaded on this machine";
  std::vector<std::byte> memory(4096);
  try {
    (void)register_host(memory);
    FAIL() << "register_host succeeded without a driver";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::no_device);
    EXPECT_NE(e.message().find("no NVIDIA driver is loaded"), std::string::npos) << e.message();
    EXPECT_EQ(e.message().find(GPUXFER_SOURCE_DIR), std::string::npos) << e.message();
  }
}

TEST(CudaErrors, AnOldDriverOrNoDeviceNamesWhatToCheck) {
  EXPECT_NE(detail::describe_cuda_error(cudaErrorNoDevice).find("CUDA_VISIBLE_DEVICES"), std::string::npos);
  EXPECT_NE(detail::describe_cuda_error(cudaErrorNoDevice).find("[cudaErrorNoDevice]"), std::string::npos);
  const std::string other = detail::describe_cuda_error(cudaErrorInvalidValue);
  EXPECT_EQ(other, std::string("cudaErrorInvalidValue (") + cudaGetErrorString(cudaErrorInvalidValue) + ")");
}

TEST(CudaErrors, SourceNamesAreBelowTheProjectRoot) {
  EXPECT_STREQ(detail::source_name("/home/builder/work/src/gpuxfer/src/memory/pinned_pool.cpp"),
               "src/memory/pinned_pool.cpp");
  EXPECT_STREQ(detail::source_name("../src/runtime/device_guard.cpp"), "src/runtime/device_guard.cpp");
  EXPECT_STREQ(detail::source_name("src/ops/copy.cpp"), "src/ops/copy.cpp");
  EXPECT_STREQ(detail::source_name("/elsewhere/tool.cpp"), "tool.cpp");
  EXPECT_STREQ(detail::source_name("tool.cpp"), "tool.cpp");
}

TEST(CudaErrors, AThrownErrorNamesNoBuildPath) {
  try {
    detail::throw_cuda(cudaErrorInvalidValue, "cudaMemcpy(...)", "/build/machine/gpuxfer/src/ops/copy.cpp", 7,
                       "");
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(" at src/ops/copy.cpp:7"), std::string::npos) << e.message();
    EXPECT_EQ(e.message().find("/build/machine"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace gpuxfer
