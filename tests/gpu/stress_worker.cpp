// GpuStress's first phase for one thread (the Worker of stress_worker.hpp, its operations in stress_ops.cpp).
#include <utility>

#include "gpu/stress_worker.hpp"

namespace gpuxfer::test::stress {

Tally run_worker(std::shared_ptr<MultiGpuManager> manager, const Config& config, std::size_t index,
                 std::vector<int> ordinals, std::atomic<std::size_t>& progress, std::atomic<const char*>& doing,
                 std::function<void(const std::string&)> record) {
  Worker worker(std::move(manager), config, index, std::move(ordinals), std::move(record));
  worker.run(progress, doing);
  return worker.tally();
}

}  // namespace gpuxfer::test::stress
