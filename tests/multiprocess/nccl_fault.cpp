// Loaded with LD_PRELOAD into the ranks of a comm_probe job: fails the Nth ncclSend (or ncclRecv) that
// the process makes through libnccl's dynamic symbols once GPUXFER_TEST_FAIL_NCCL_SEND=N (or _RECV=N) is
// set in it, as NCCL refuses a call it cannot take (ncclInvalidArgument, nothing queued), or, with
// GPUXFER_TEST_FAIL_NCCL_AS=remote, as NCCL answers once it knows a peer or its link failed
// (ncclRemoteError). comm_probe sets the variable on one rank right before the call under test, so that
// rank's step fails after part of its NCCL work is queued. Every other call goes to NCCL.
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include <nccl.h>

namespace {

// Whether this call is the Nth since @p variable was first seen set (N its value).
bool fails(const char* variable, std::atomic<long>& calls) {
  const char* at = std::getenv(variable);
  if (at == nullptr) return false;
  return ++calls == std::atol(at);
}

// What a failed call returns.
ncclResult_t failure() {
  const char* as = std::getenv("GPUXFER_TEST_FAIL_NCCL_AS");
  return as != nullptr && std::strcmp(as, "remote") == 0 ? ncclRemoteError : ncclInvalidArgument;
}

template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

std::atomic<long> sends{0};
std::atomic<long> recvs{0};

}  // namespace

extern "C" ncclResult_t ncclSend(const void* buffer, size_t count, ncclDataType_t type, int peer,
                                 ncclComm_t comm, cudaStream_t stream) {
  static const auto real = next<decltype(&ncclSend)>("ncclSend");
  if (fails("GPUXFER_TEST_FAIL_NCCL_SEND", sends) || real == nullptr) return failure();
  return real(buffer, count, type, peer, comm, stream);
}

extern "C" ncclResult_t ncclRecv(void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                                 cudaStream_t stream) {
  static const auto real = next<decltype(&ncclRecv)>("ncclRecv");
  if (fails("GPUXFER_TEST_FAIL_NCCL_RECV", recvs) || real == nullptr) return failure();
  return real(buffer, count, type, peer, comm, stream);
}
