#include "memory/host_registry.hpp"

#include <cstdio>
#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include <gpuxfer/detail/device_guard.hpp>
#include <gpuxfer/error.hpp>
#include <gpuxfer/host_registration.hpp>

#include "memory/host_memory.hpp"
#include "runtime/capture_mode.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/log.hpp"

namespace gpuxfer {
namespace detail {
namespace {

std::string describe(std::uintptr_t begin, std::size_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "[%#zx, %#zx)", static_cast<std::size_t>(begin), static_cast<std::size_t>(begin + bytes));
  return std::string(text) + " (" + std::to_string(bytes) + " bytes)";
}

// The refusal of memory that is page-locked already, whichever way the driver says so.
Error already_pinned(const std::string& what) {
  return Error(Errc::invalid_argument, what + ": the memory is already page-locked (cudaHostAlloc or "
                                              "cudaHostRegister outside gpuxfer); use it as it is");
}

}  // namespace

HostRegistry& host_registry() {
  static auto* registry = new HostRegistry;
  return *registry;
}

void HostRegistry::add(std::byte* ptr, std::size_t bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(ptr);
  const std::string what = "register_host of " + describe(begin, bytes);
  {
    std::lock_guard lock(mutex_);
    // The first registration that ends after begin is the only one that can overlap from below or inside.
    auto next = ranges_.upper_bound(begin);
    if (next != ranges_.begin()) {
      if (auto prev = std::prev(next); prev->first + prev->second.bytes > begin) next = prev;
    }
    if (next != ranges_.end() && next->first < begin + bytes) {
      throw Error(Errc::invalid_argument, what + ": overlaps the live registration of " +
                                              describe(next->first, next->second.bytes) +
                                              "; reset that one first, or register one range that covers both");
    }
    ranges_.emplace(begin, Range{bytes});  // reserved: a second caller now sees the overlap
  }
  // The driver answers cudaErrorInvalidValue, not "already registered", for memory cudaHostAlloc made.
  if (is_pinned(ptr) || is_pinned(ptr + bytes - 1)) {
    {
      std::lock_guard lock(mutex_);
      ranges_.erase(begin);
    }
    throw already_pinned(what);
  }
  // register_host knows no manager: it pins in the primary context of the lowest device that has one
  // already (HostContextGuard), and in a primary context even when the caller has a context of its own,
  // which would unlock the memory when the caller destroys it while the registration lives on.
  int device = -1;
  const cudaError_t err = [&] {
    const HostContextGuard context(-1, HostContextGuard::PrimaryOnly{});
    const RelaxedCapture relaxed;
    if (handled(cudaGetDevice(&device)) != cudaSuccess) device = -1;
    return handled(cudaHostRegister(ptr, bytes, cudaHostRegisterPortable));
  }();
  if (err == cudaSuccess) {
    std::lock_guard lock(mutex_);
    ranges_.at(begin).device = device;
    return;
  }
  {
    std::lock_guard lock(mutex_);
    ranges_.erase(begin);
  }
  if (err == cudaErrorHostMemoryAlreadyRegistered) throw already_pinned(what);
  GPUXFER_CUDA_TRY_CTX(err, what);
}

void HostRegistry::remove(std::byte* ptr) noexcept {
  const auto begin = reinterpret_cast<std::uintptr_t>(ptr);
  int device = -1;
  {
    std::lock_guard lock(mutex_);
    if (const auto found = ranges_.find(begin); found != ranges_.end()) device = found->second.device;
  }
  const cudaError_t err = [&] {
    const HostContextGuard context(device, HostContextGuard::PrimaryOnly{});
    const RelaxedCapture relaxed;
    return handled(cudaHostUnregister(ptr));
  }();
  if (err != cudaSuccess) GPUXFER_LOG(warn, std::string("cudaHostUnregister failed: ") + cudaGetErrorName(err));
  std::lock_guard lock(mutex_);
  ranges_.erase(begin);
}

HostRegistry::Cover HostRegistry::covers(const void* ptr, std::size_t bytes) const {
  const auto begin = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(mutex_);
  auto next = ranges_.upper_bound(begin);
  if (next == ranges_.begin()) return Cover::none;
  const auto& [start, range] = *std::prev(next);
  const std::uintptr_t end = start + range.bytes;
  if (begin >= end) return Cover::none;
  return bytes <= end - begin ? Cover::whole : Cover::partly;
}

}  // namespace detail

HostRegistration register_host(std::span<std::byte> memory) {
  if (memory.empty()) return {};
  if (memory.data() == nullptr) {
    throw Error(Errc::invalid_argument, "register_host: the memory is null but " + std::to_string(memory.size()) +
                                            " bytes long");
  }
  detail::host_registry().add(memory.data(), memory.size());
  return HostRegistration(memory.data(), memory.size());
}

HostRegistration::~HostRegistration() { reset(); }

HostRegistration::HostRegistration(HostRegistration&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

HostRegistration& HostRegistration::operator=(HostRegistration&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void HostRegistration::reset() noexcept {
  if (data_ != nullptr) detail::host_registry().remove(data_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace gpuxfer
