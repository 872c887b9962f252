#include "engine/registry.hpp"

#include <algorithm>
#include <string>

#include <gpuxfer/error.hpp>

#include "node/pointer_checks.hpp"

namespace gpuxfer::detail {
namespace {

DeviceRange range_of(const ManagerState& m, std::size_t device, const Registration& reg) {
  check_still_allocated(m, device, reg.ptr, reg.size, reg.allocation);
  return {device, static_cast<std::byte*>(reg.ptr), reg.size, {}, reg.order};
}

}  // namespace

DeviceRange RegistrySnapshot::require(std::size_t device, const char* op) const {
  if (!slots_[device]) {
    throw Error(Errc::invalid_buffer, std::string(op) + ": no buffer is registered on " + device_name(m_, device) +
                                          " (call set_device_buffer first)");
  }
  return range_of(m_, device, *slots_[device]);
}

void check_fits(const ManagerState& m, std::size_t bytes, const DeviceRange& dst, const char* op) {
  if (bytes > dst.size) {
    throw Error(Errc::invalid_argument, std::string(op) + ": " + std::to_string(bytes) +
                                            " bytes do not fit the buffer of " + std::to_string(dst.size) +
                                            " bytes registered on " + device_name(m, dst.device));
  }
}

std::vector<std::optional<DeviceRange>> RegistrySnapshot::present(std::optional<std::size_t> skip) const {
  std::vector<std::optional<DeviceRange>> out;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (skip && *skip == i) continue;
    if (slots_[i]) {
      out.emplace_back(range_of(m_, i, *slots_[i]));
    } else {
      out.emplace_back(std::nullopt);
    }
  }
  return out;
}

void BufferRegistry::set(std::size_t index, Registration reg) {
  std::lock_guard lock(mutex_);
  std::optional<Registration>& slot = slots_[index];
  // The same memory again: gpuxfer's copies still in flight on it stay ordered with what comes next.
  if (reg.order) {
    if (slot && slot->ptr == reg.ptr && slot->order) {
      reg.order->inherit(*slot->order);
    } else {
      auto& gone = retired_[index];
      const auto same =
          std::find_if(gone.begin(), gone.end(), [&](const auto& g) { return g.first == reg.ptr; });
      if (same != gone.end()) {
        reg.order->inherit(*same->second);
        gone.erase(same);
      }
    }
  }
  if (slot && slot->ptr != reg.ptr) retire(index, *slot);
  slot = std::move(reg);
}

void BufferRegistry::clear(std::size_t index) {
  std::lock_guard lock(mutex_);
  if (slots_[index]) retire(index, *slots_[index]);
  slots_[index].reset();
}

void BufferRegistry::retire(std::size_t index, const Registration& reg) {
  if (!reg.order) return;
  auto& gone = retired_[index];
  // BufferOrder::idle() neither waits nor blocks: one an operation holds counts as busy.
  std::erase_if(gone, [&](const auto& g) { return g.first == reg.ptr || g.second->idle(); });
  if (!reg.order->idle()) gone.emplace_back(reg.ptr, reg.order);
}

std::optional<Registration> BufferRegistry::get(std::size_t index) const {
  std::lock_guard lock(mutex_);
  return slots_[index];
}

RegistrySnapshot BufferRegistry::snapshot() const {
  std::lock_guard lock(mutex_);
  return RegistrySnapshot(m_, slots_);
}

}  // namespace gpuxfer::detail
