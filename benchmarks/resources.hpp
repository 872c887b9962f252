// The CUDA and NCCL resources the bench owns itself: the CUDA ones are the ones the tests and the command
// use too (testing/include/gpuxfer/testing/cuda_resources.hpp); NCCL communicators are the bench's own.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nccl.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/testing/cuda_resources.hpp>

namespace gpuxfer::bench {

using testing::cuda_check;
using testing::DeviceGuard;
using testing::DeviceMemory;
using testing::Event;
using testing::PinnedMemory;
using testing::Stream;

/// Throws Error(Errc::nccl_error) naming @p what and the NCCL error when @p status is not success.
inline void nccl_check(ncclResult_t status, const char* what) {
  if (status != ncclSuccess) {
    throw Error(Errc::nccl_error, std::string(what) + ": " + ncclGetErrorString(status));
  }
}

/// Calls @p call(d) for every d of @p devices (each returning an ncclResult_t) inside one NCCL group;
/// a call that fails ends the group, then throws naming @p what.
template <class Devices, class Call>
void nccl_group(const Devices& devices, const char* what, Call&& call) {
  nccl_check(ncclGroupStart(), "ncclGroupStart");
  for (const auto d : devices) {
    const ncclResult_t r = call(d);
    if (r != ncclSuccess) {
      static_cast<void>(ncclGroupEnd());
      nccl_check(r, what);
    }
  }
  nccl_check(ncclGroupEnd(), "ncclGroupEnd");
}

/// One NCCL communicator per ordinal of @p ordinals (rank i on ordinals[i]), from ncclCommInitAll.
class NcclComms {
 public:
  explicit NcclComms(const std::vector<int>& ordinals) : comms_(ordinals.size(), nullptr) {
    nccl_check(ncclCommInitAll(comms_.data(), static_cast<int>(comms_.size()), ordinals.data()),
               "ncclCommInitAll");
  }
  ~NcclComms() {
    for (ncclComm_t comm : comms_) {
      if (comm != nullptr) static_cast<void>(ncclCommDestroy(comm));
    }
  }
  NcclComms(const NcclComms&) = delete;
  NcclComms& operator=(const NcclComms&) = delete;

  [[nodiscard]] ncclComm_t get(std::size_t rank) const noexcept { return comms_[rank]; }

 private:
  std::vector<ncclComm_t> comms_;
};

}  // namespace gpuxfer::bench
