#include "engine/registry.hpp"

#include <algorithm>
#include <string>

#include <gpuxfer/error.hpp>

#include "node/pointer_checks.hpp"

namespace gpuxfer::detail {
namespace {

DeviceRange range_of(const ManagerState& m, std::size_t device, const Registration& reg) {
  check_still_allocated(m, device, reg.ptr, reg.size, reg.allocation);
  return {device, static_cast<std::byte*>(reg.ptr), reg.size, {}, reg.order, reg.stream};
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
  // The same memory again keeps its ordering: gpuxfer's work on it, in flight or still to be recorded by
  // an operation whose snapshot came first, stays ordered with what comes next.
  if (reg.order) {
    if (slot && slot->ptr == reg.ptr && slot->order) {
      reg.order = slot->order;
    } else {
      auto& gone = retired_[index];
      const auto same =
          std::find_if(gone.begin(), gone.end(), [&](const auto& g) { return g.first == reg.ptr; });
      if (same != gone.end()) {
        reg.order = std::move(same->second);
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
  // In use: a snapshot holds it (a copy beyond the registry's own one; copies are made under the lock, so
  // the count errs high only), or gpuxfer's work on it is in flight. BufferOrder::idle() neither waits nor
  // blocks: one an operation holds counts as busy.
  const auto in_use = [](const std::shared_ptr<BufferOrder>& order) {
    return order.use_count() > 1 || !order->idle();
  };
  std::erase_if(gone, [&](const auto& g) { return g.first == reg.ptr || !in_use(g.second); });
  if (in_use(reg.order)) gone.emplace_back(reg.ptr, reg.order);
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
