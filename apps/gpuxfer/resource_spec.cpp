// `gpuxfer resource-spec`: a ctest resource specification with one "gpus" resource per visible device,
// so that `ctest --resource-spec-file` can run GPU tests (which declare RESOURCE_GROUPS) in parallel.

#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include <gpuxfer/device_info.hpp>

#include "commands.hpp"

namespace gpuxfer::cli {

constexpr int slots_per_gpu = 6;

int run_resource_spec(const ResourceSpecArgs& args) {
  using Json = nlohmann::ordered_json;
  const auto manager = open_manager();
  Json gpus = Json::array();
  // ctest hands a test the ids it reserved (CTEST_RESOURCE_GROUP_<n>_GPUS=id:<id>,slots:1): the CUDA
  // ordinal is what a test can pass to cudaSetDevice. Each GPU takes several tests at once (a test
  // uses a few hundred MiB of a GPU's memory and a share of its links), so ctest -j can fill them.
  for (const DeviceInfo& device : manager->devices()) {
    gpus.push_back(Json{{"id", std::to_string(device.ordinal)}, {"slots", slots_per_gpu}});
  }
  if (manager->device_count() == 0) {
    std::fprintf(stderr, "gpuxfer resource-spec: 0 devices (%s)\n", no_device_reason(*manager).c_str());
  }
  const Json spec{{"version", {{"major", 1}, {"minor", 0}}}, {"local", Json::array({Json{{"gpus", gpus}}})}};
  const std::string text = spec.dump(2) + "\n";
  if (args.output.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream file(args.output, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) {
    throw std::runtime_error("cannot write the resource spec to " + args.output);
  }
  return 0;
}

}  // namespace gpuxfer::cli
