// Entry point of gpuxfer_gpu_tests. Under `ctest --resource-spec-file`, ctest hands each test its GPUs
// through CTEST_RESOURCE_GROUP_* variables; they become CUDA_VISIBLE_DEVICES here, before the first
// CUDA call, so tests running in parallel never share a device they did not ask for.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace {

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(sep, start), text.size());
    parts.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::optional<std::string> env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
}

// The GPU ids of one resource group: "id:3,slots:1" (several separated by ';').
std::vector<std::string> group_gpu_ids(std::string_view spec) {
  std::vector<std::string> ids;
  for (const std::string& entry : split(spec, ';')) {
    for (const std::string& field : split(entry, ',')) {
      if (field.rfind("id:", 0) == 0) ids.push_back(field.substr(3));
    }
  }
  return ids;
}

// Sets CUDA_VISIBLE_DEVICES from ctest's resource groups. Returns false (after saying why) when the
// variables are malformed; does nothing when ctest allocated no resources.
bool apply_ctest_resource_groups() {
  const std::optional<std::string> count_text = env("CTEST_RESOURCE_GROUP_COUNT");
  if (!count_text) return true;
  const int count = std::atoi(count_text->c_str());
  if (count <= 0) {
    std::fprintf(stderr, "gpuxfer_gpu_tests: bad CTEST_RESOURCE_GROUP_COUNT '%s'\n", count_text->c_str());
    return false;
  }

  // ctest's ids index into a CUDA_VISIBLE_DEVICES the runner already set, else they are ordinals.
  std::vector<std::string> visible;
  if (const std::optional<std::string> outer = env("CUDA_VISIBLE_DEVICES"); outer && !outer->empty()) {
    visible = split(*outer, ',');
  }

  std::vector<std::string> chosen;
  for (int group = 0; group < count; ++group) {
    const std::string name = "CTEST_RESOURCE_GROUP_" + std::to_string(group) + "_GPUS";
    const std::optional<std::string> spec = env(name);
    if (!spec) {
      std::fprintf(stderr, "gpuxfer_gpu_tests: %s is not set (resource type must be 'gpus')\n", name.c_str());
      return false;
    }
    for (const std::string& id : group_gpu_ids(*spec)) {
      std::string device = id;
      if (!visible.empty()) {
        char* end = nullptr;
        const long index = std::strtol(id.c_str(), &end, 10);
        if (end == id.c_str() || *end != '\0' || index < 0 || static_cast<std::size_t>(index) >= visible.size()) {
          std::fprintf(stderr, "gpuxfer_gpu_tests: resource id '%s' is not an index into CUDA_VISIBLE_DEVICES\n",
                       id.c_str());
          return false;
        }
        device = visible[static_cast<std::size_t>(index)];
      }
      chosen.push_back(device);
    }
  }
  // A GPU has several slots, so ctest may give two groups of one test the same GPU. Such a test asked
  // for distinct GPUs: let it see every device rather than fewer than it needs.
  std::vector<std::string> distinct = chosen;
  std::sort(distinct.begin(), distinct.end());
  if (std::adjacent_find(distinct.begin(), distinct.end()) != distinct.end()) {
    std::fprintf(stderr, "gpuxfer_gpu_tests: ctest gave groups the same GPU; every device stays visible\n");
    return true;
  }
  std::string devices;
  for (const std::string& device : chosen) devices += (devices.empty() ? "" : ",") + device;
  if (setenv("CUDA_VISIBLE_DEVICES", devices.c_str(), 1) != 0) {
    std::perror("gpuxfer_gpu_tests: setenv CUDA_VISIBLE_DEVICES");
    return false;
  }
  std::fprintf(stderr, "gpuxfer_gpu_tests: CUDA_VISIBLE_DEVICES=%s (from ctest resource groups)\n",
               devices.c_str());
  // Mapped once: a child process (a death test) must not map its ids onto this list again.
  unsetenv("CTEST_RESOURCE_GROUP_COUNT");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!apply_ctest_resource_groups()) return 2;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
