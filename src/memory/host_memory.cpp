#include "memory/host_memory.hpp"

#include <cstddef>

#include <cstdint>

#include <cuda_runtime_api.h>

#include <gpuxfer/detail/device_guard.hpp>

#include "memory/host_registry.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/driver_api.hpp"

namespace gpuxfer::detail {

namespace {

// True when the driver says @p ptr is page-locked host memory, its attributes (for the current device)
// then in @p attr.
bool pinned_attributes(const void* ptr, cudaPointerAttributes& attr) noexcept {
  attr = {};
  if (handled(cudaPointerGetAttributes(&attr, ptr)) != cudaSuccess) return false;
  return attr.type == cudaMemoryTypeHost;
}

// True when the current device maps pinned byte @p ptr at its own address.
bool maps_at_same_address(const void* ptr) noexcept {
  cudaPointerAttributes attr;
  return pinned_attributes(ptr, attr) && attr.devicePointer == ptr;
}

}  // namespace

bool is_pinned(const void* ptr) noexcept {
  if (ptr == nullptr) return false;
  const HostContextGuard context;  // a thread without a context gets none
  cudaPointerAttributes attr;
  return pinned_attributes(ptr, attr);
}

bool is_pinned_range(const void* ptr, std::size_t bytes) noexcept {
  if (bytes == 0 || ptr == nullptr) return false;
  try {
    switch (host_registry().covers(ptr, bytes)) {
      case HostRegistry::Cover::whole: return true;
      case HostRegistry::Cover::partly: return false;  // the rest is not ours to DMA
      case HostRegistry::Cover::none: break;
    }
  } catch (...) {  // std::mutex failing to lock: take the staged path, which is always safe
    return false;
  }
  const HostContextGuard context;  // also what lets the driver answer address_range below
  if (!is_pinned(ptr)) return false;
  // Pinned outside register_host (cudaHostAlloc, the caller's cudaHostRegister): the driver knows the
  // extent of the allocation; where it cannot say, both ends must be pinned.
  AddressRange range;
  const auto begin = reinterpret_cast<std::uintptr_t>(ptr);
  if (address_range(ptr, range) == 0 && begin >= range.base) return bytes <= range.base + range.size - begin;
  return is_pinned(static_cast<const std::byte*>(ptr) + bytes - 1);
}

bool device_maps_pinned_range(const void* ptr, std::size_t bytes) noexcept {
  if (bytes == 0 || ptr == nullptr) return false;
  // Every page asked: the range may span pinned allocations mapped differently, or not at all (a device
  // that cannot use host pointers for registered memory maps it elsewhere).
  constexpr std::uintptr_t page = 4096;
  const auto first = reinterpret_cast<std::uintptr_t>(ptr);
  const std::uintptr_t last = first + bytes - 1;
  if (!maps_at_same_address(ptr)) return false;
  for (std::uintptr_t at = (first / page + 1) * page; at <= last; at += page) {
    if (!maps_at_same_address(reinterpret_cast<const void*>(at))) return false;
  }
  return true;
}

}  // namespace gpuxfer::detail
