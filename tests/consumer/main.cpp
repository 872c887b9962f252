// Creates a manager that accepts zero devices and prints what it found: links and runs on any machine.
#include <cstdio>

#include <gpuxfer/gpuxfer.hpp>

int main() {
  gpuxfer::Options options = gpuxfer::Options::from_env();
  options.min_devices = 0;
  const auto manager = gpuxfer::MultiGpuManager::create(options);
  std::printf("consumer: gpuxfer %s, %zu devices\n", gpuxfer::version_string, manager->device_count());
  return 0;
}
