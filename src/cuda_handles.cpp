#include "cuda_handles.hpp"

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda_check.hpp"

namespace gpuxfer::detail {

DeviceGuard::DeviceGuard(int device) {
  GPUXFER_CUDA_TRY(cudaGetDevice(&previous_));
  // Set even when it is already the current device: on a thread that has made no CUDA call yet this is
  // what makes the device's context current, which driver calls (cuMemGetAddressRange) need.
  GPUXFER_CUDA_TRY_CTX(cudaSetDevice(device), "device ordinal " + std::to_string(device));
  switched_ = previous_ != device;
}

DeviceGuard::~DeviceGuard() {
  if (switched_) (void)cudaSetDevice(previous_);
}

Stream::Stream(int device) : device_(device) {
  DeviceGuard guard(device);
  GPUXFER_CUDA_TRY_CTX(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                       "creating a copy stream on ordinal " + std::to_string(device));
}

Stream::~Stream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    device_ = other.device_;
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

Event::Event(int device) : device_(device) {
  DeviceGuard guard(device);
  GPUXFER_CUDA_TRY_CTX(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming),
                       "creating an event on ordinal " + std::to_string(device));
}

Event::~Event() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
}

void Event::record(cudaStream_t stream) {
  GPUXFER_CUDA_TRY_CTX(cudaEventRecord(event_, stream), "recording an event on ordinal " + std::to_string(device_));
}

MemPool::MemPool(int device, std::size_t keep_bytes) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  GPUXFER_CUDA_TRY_CTX(cudaMemPoolCreate(&pool_, &props), "creating a scratch memory pool on ordinal " + std::to_string(device));
  std::uint64_t threshold = keep_bytes;
  const cudaError_t err = cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold);
  if (err != cudaSuccess) {
    (void)cudaMemPoolDestroy(pool_);
    GPUXFER_CUDA_TRY_CTX(err, "setting the scratch pool's release threshold");
  }
}

MemPool::~MemPool() {
  if (pool_ != nullptr) (void)cudaMemPoolDestroy(pool_);
}

namespace {

struct EventCache {
  std::mutex mutex;
  std::unordered_map<int, std::vector<Event*>> idle;  // by device ordinal
};

// Never destroyed: events handed out may be let go during static destruction, after which a cache
// that no longer exists would be touched. The driver frees the events with the process.
EventCache& event_cache() {
  static auto* cache = new EventCache;
  return *cache;
}

}  // namespace

SharedEvent make_event(int device) {
  EventCache& cache = event_cache();
  Event* event = nullptr;
  {
    std::lock_guard lock(cache.mutex);
    auto& idle = cache.idle[device];
    if (!idle.empty()) {
      event = idle.back();
      idle.pop_back();
    }
  }
  if (event == nullptr) event = new Event(device);
  // A recorded event may be recorded again by its next owner: waits already queued on it keep the
  // state they captured, and nobody else queries it.
  return SharedEvent(event, [](Event* e) {
    EventCache& c = event_cache();
    try {
      std::lock_guard lock(c.mutex);
      c.idle[e->device()].push_back(e);
    } catch (...) {
      delete e;
    }
  });
}

SharedEvent record_event(int device, cudaStream_t stream) {
  SharedEvent event = make_event(device);
  event->record(stream);
  return event;
}

void stream_wait(cudaStream_t stream, const SharedEvent& event) {
  if (event) GPUXFER_CUDA_TRY(cudaStreamWaitEvent(stream, event->get(), 0));
}

}  // namespace gpuxfer::detail
