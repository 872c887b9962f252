#include "node/nccl_comms.hpp"

#include <string>

#include <gpuxfer/detail/device_guard.hpp>

#include "runtime/cuda_check.hpp"
#include "runtime/log.hpp"

namespace gpuxfer::detail {

NcclComms::~NcclComms() {
  for (ncclComm_t comm : comms_) (void)ncclCommDestroy(comm);
}

const std::vector<ncclComm_t>& NcclComms::get(const std::vector<int>& ordinals) {
  std::lock_guard lock(mutex_);
  if (comms_.empty()) {
    std::vector<ncclComm_t> comms(ordinals.size(), nullptr);
    // NCCL restores the device it found: let it find one of ours, whose guard restores the caller's context.
    DeviceGuard guard(ordinals.front());
    GPUXFER_NCCL_TRY_CTX(ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), ordinals.data()),
                         "creating NCCL communicators over " + std::to_string(ordinals.size()) + " devices");
    comms_ = std::move(comms);
    GPUXFER_LOG(info, "NCCL communicators created over " + std::to_string(ordinals.size()) + " devices");
  }
  return comms_;
}

}  // namespace gpuxfer::detail
