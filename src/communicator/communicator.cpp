// Communicator's creation: the launch environment or explicit arguments, the device of the rank, rank 0's
// NCCL unique id through the rendezvous, the non-blocking NCCL communicator.
#include <gpuxfer/communicator.hpp>
#include <gpuxfer/detail/device_guard.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <nccl.h>

#include <gpuxfer/error.hpp>

#include "bootstrap/deadline.hpp"
#include "bootstrap/launch_env.hpp"
#include "bootstrap/rendezvous.hpp"
#include "communicator/comm_launch.hpp"
#include "communicator/communicator_state.hpp"
#include "hostops/host_transfer.hpp"
#include "node/environment.hpp"
#include "runtime/capture_mode.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/log.hpp"

namespace gpuxfer {
namespace detail {

void DeviceFree::operator()(void* ptr) const noexcept {
  DeviceGuard guard(device, std::nothrow);
  const RelaxedCapture relaxed;
  (void)handled(cudaFree(ptr));
}
void PinnedFree::operator()(void* ptr) const noexcept {
  const RelaxedCapture relaxed;
  (void)handled(cudaFreeHost(ptr));
}

namespace {

// Whether @p stream has no work left, or none within @p deadline (polled: no wait on the device past it).
// A stream CUDA cannot query any more (a sticky error) runs nothing more either.
bool drained(cudaStream_t stream, const Deadline& deadline) noexcept {
  if (stream == nullptr) return true;
  for (;;) {
    const cudaError_t status = cudaStreamQuery(stream);
    if (status != cudaErrorNotReady) {
      (void)handled(status);
      return true;
    }
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

bool CommunicatorState::settle() noexcept {
  // The last operation may still be queued on a caller's stream, behind a peer that failed: waited for
  // within the timeout, else the communicator is aborted (which ends its queued work), so that the wait
  // below ends too, unless the streams wait for work of the caller's.
  if (last && comm.usable()) {
    try {
      comm.wait(*last, "releasing the communicator", other_ranks(rank, world_size));
    } catch (...) {
      comm.abort();  // wait() aborts on a timeout or NCCL's error; a CUDA error leaves it to this
    }
  }
  const DeviceGuard guard(device, std::nothrow);
  const RelaxedCapture relaxed;
  const Deadline deadline(timeout);
  return drained(stream.get(), deadline) && drained(down.get(), deadline);
}

CommunicatorState::~CommunicatorState() {
  arena.clear();
  mappings.clear();
}

void release(std::unique_ptr<CommunicatorState>& state) noexcept {
  if (state && !state->settle()) {
    state->comm.abort();  // the peers fail now rather than wait for a finalise that never comes
    GPUXFER_LOG(warn,
                state->where + ": released while its streams still wait, past " +
                    Deadline(state->timeout).describe() +
                    ", for work that is not its own (the caller's, on the stream of a call or the legacy "
                    "default stream): its device and host memory stays allocated, rather than freed "
                    "under copies that may still run");
    (void)state.release();  // left allocated on purpose, see above
  }
  state.reset();
}

namespace {

// @p device's UUID as nvidia-smi spells it ("GPU-8-4-4-4-12 hex digits"): the same in every process, whatever
// devices each sees (CUDA_VISIBLE_DEVICES), so that the rendezvous can refuse two ranks on one GPU.
std::string gpu_id(int device, const std::string& where) {
  cudaDeviceProp props{};
  GPUXFER_CUDA_TRY_CTX(cudaGetDeviceProperties(&props, device), where + ": reading the device's UUID");
  static constexpr char digits[] = "0123456789abcdef";
  std::string id = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) id += '-';
    const auto byte = static_cast<unsigned char>(props.uuid.bytes[i]);
    id += digits[byte >> 4];
    id += digits[byte & 0xf];
  }
  return id;
}

// The device this rank drives, checked against what CUDA sees before any rank waits for this one.
int choose_device(const LaunchEnv& env, const CommunicatorOptions& options) {
  const std::string who = "rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size);
  int count = 0;
  const cudaError_t status = handled(cudaGetDeviceCount(&count));
  if (status != cudaSuccess || count == 0) {
    throw Error(Errc::no_device,
                who + ": no CUDA device (cudaGetDeviceCount: " +
                    (status != cudaSuccess ? describe_cuda_error(status)
                                           : std::string("0 devices")) +
                    ")");
  }
  const int device = options.device.value_or(env.local_rank);
  if (device >= count) {
    throw Error(Errc::no_device,
                who + " needs device " + std::to_string(device) +
                    (options.device ? " (CommunicatorOptions::device)" : " (its local rank)") + " but CUDA sees " +
                    std::to_string(count) +
                    " device(s): start one rank per GPU, or choose with CommunicatorOptions::device");
  }
  return device;
}

// @p exchange hands rank 0's unique id to every rank; null: the rendezvous of @p env.
std::unique_ptr<CommunicatorState> create(LaunchEnv env, const CommunicatorOptions& options,
                                          const Communicator::BlobExchange* exchange = nullptr) {
  if (options.device && *options.device < 0) {
    throw Error(Errc::invalid_argument, "CommunicatorOptions::device is " + std::to_string(*options.device));
  }
  if (options.timeout) {
    if (options.timeout->count() < 1) {
      throw Error(Errc::invalid_argument,
                  "CommunicatorOptions::timeout is " + std::to_string(options.timeout->count()) + " ms");
    }
    env.timeout = *options.timeout;
  }
  auto s = std::make_unique<CommunicatorState>();
  s->node_id = read_node_id(process_env_lookup());  // read once, refused before any rank waits for this one
  s->rank = env.rank;
  s->world_size = env.world_size;
  s->timeout = env.timeout;
  s->device = choose_device(env, options);
  s->where = "rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size) + " (device " +
             std::to_string(s->device) + ")";
  env.gpu = gpu_id(s->device, s->where);
  ncclUniqueId id{};
  std::string blob;
  if (env.rank == 0) {
    GPUXFER_NCCL_TRY_CTX(ncclGetUniqueId(&id), s->where + ": making the NCCL unique id");
    blob.assign(reinterpret_cast<const char*>(&id), sizeof(id));
  }
  blob = exchange != nullptr ? (*exchange)(blob) : exchange_blob(env, blob);
  if (blob.size() != sizeof(id)) {
    throw Error(Errc::comm_error, s->where + ": rank 0 sent " + std::to_string(blob.size()) +
                                      " bytes, not an NCCL unique id of " + std::to_string(sizeof(id)) +
                                      ": is every rank the same gpuxfer?");
  }
  std::memcpy(&id, blob.data(), sizeof(id));
  s->comm = NcclComm(id, env.rank, env.world_size, s->device, env.timeout, s->where);
  s->stream = Stream(s->device);
  DeviceGuard guard(s->device);
  const RelaxedCapture relaxed;
  void* ptr = nullptr;
  GPUXFER_CUDA_TRY_CTX(cudaMalloc(&ptr, s->device_word_bytes()), s->where + ": the size exchange's device memory");
  s->sizes_device = std::unique_ptr<std::uint64_t, DeviceFree>(static_cast<std::uint64_t*>(ptr), {s->device});
  GPUXFER_CUDA_TRY_CTX(cudaMemset(ptr, 0, s->device_word_bytes()), s->where + ": the size exchange");
  GPUXFER_CUDA_TRY_CTX(cudaHostAlloc(&ptr, s->exchange_bytes(), cudaHostAllocPortable),
                       s->where + ": the size exchange");
  s->sizes_host.reset(static_cast<std::uint64_t*>(ptr));
  // The ranks' nodes, here where waiting costs nothing: on a first stream-ordered host operation, the
  // cudaFree of the exchange's device scratch would wait for the caller's GPU work.
  know_nodes(*s, "creating the communicator");
  return s;
}

// The place @p rank of @p world_size, checked. @throws Error(Errc::invalid_argument) outside the world
LaunchEnv place(int rank, int world_size) {
  if (world_size < 1) throw Error(Errc::invalid_argument, "world_size is " + std::to_string(world_size));
  if (rank < 0 || rank >= world_size) {
    throw Error(Errc::invalid_argument, "rank " + std::to_string(rank) + " is out of range: a world of " +
                                            std::to_string(world_size) + " has ranks 0 to " +
                                            std::to_string(world_size - 1));
  }
  LaunchEnv env;
  env.rank = rank;
  env.world_size = world_size;
  return env;
}

}  // namespace
}  // namespace detail

Communicator Communicator::from_environment(const CommunicatorOptions& options) {
  return Communicator(detail::create(detail::launch_env_from_process(), options));
}

Communicator::Communicator(int rank, int world_size, const std::string& init_address,
                           const CommunicatorOptions& options) {
  detail::LaunchEnv env = detail::place(rank, world_size);
  env.local_rank = rank;
  env.launcher = "explicit";
  if (!init_address.empty()) env.init = detail::parse_init_address(init_address, "init_address");
  env.timeout = detail::read_comm_timeout(detail::process_env_lookup());
  if (world_size > 1 && env.init.kind == detail::InitAddress::Kind::none) {
    throw Error(Errc::invalid_option, "a world of " + std::to_string(world_size) +
                                          " ranks needs an init_address: tcp://<rank 0's host>:<port> or "
                                          "file:///<a path every rank sees>");
  }
  state_ = detail::create(std::move(env), options);
}

Communicator Communicator::from_exchange(int rank, int world_size, int local_rank, const BlobExchange& exchange,
                                         const CommunicatorOptions& options) {
  detail::LaunchEnv env = detail::place(rank, world_size);
  if (local_rank < 0) throw Error(Errc::invalid_argument, "local_rank is " + std::to_string(local_rank));
  if (!exchange) throw Error(Errc::invalid_argument, "from_exchange needs an exchange function, got none");
  env.local_rank = local_rank;
  env.launcher = "caller's exchange";
  env.timeout = detail::read_comm_timeout(detail::process_env_lookup());
  return Communicator(detail::create(std::move(env), options, &exchange));
}

Communicator::Communicator(std::unique_ptr<detail::CommunicatorState> state) noexcept : state_(std::move(state)) {}
Communicator::~Communicator() { detail::release(state_); }
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    detail::release(state_);
    state_ = std::move(other.state_);
  }
  return *this;
}

int Communicator::rank() const noexcept { return state_->rank; }
int Communicator::world_size() const noexcept { return state_->world_size; }
int Communicator::device() const noexcept { return state_->device; }
std::chrono::milliseconds Communicator::timeout() const noexcept { return state_->timeout; }

void Communicator::synchronize(cudaStream_t stream) {
  detail::DeviceGuard guard(state_->device);
  detail::check_stream(*state_, stream, "synchronize", "a capturing stream has nothing to wait for until its graph is launched");
  const detail::SharedEvent done = detail::record_event(state_->device, stream);
  state_->comm.wait(*done, "synchronize", detail::other_ranks(state_->rank, state_->world_size));
}

}  // namespace gpuxfer
