// The per-device "last registered buffer" slots, and the checks that a device pointer is what it claims.
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

#include "cuda_handles.hpp"
#include "driver_api.hpp"
#include "manager_impl.hpp"

namespace gpuxfer::detail {

/// A registered buffer: where it is, the allocation it lies in (to notice a free), and the event after
/// which its contents are ready.
struct Registration {
  void* ptr = nullptr;
  std::size_t size = 0;
  AddressRange allocation;
  SharedEvent ready;  // null: nothing to wait for
};

/// Checks that [ptr, ptr + size) is device memory of device @p index and returns its allocation.
/// @p what names the argument in messages. @throws Error(Errc::invalid_buffer)
[[nodiscard]] AddressRange validate_device_range(const ManagerImpl& impl, std::size_t index, const void* ptr,
                                                 std::size_t size, const char* what);

/// Throws Error(Errc::invalid_buffer) when @p reg's allocation has been freed (or replaced) since it
/// was registered.
void recheck(const ManagerImpl& impl, std::size_t index, const Registration& reg);

class BufferRegistry {
 public:
  explicit BufferRegistry(std::size_t devices) : slots_(devices) {}

  void set(std::size_t index, Registration reg);
  void clear(std::size_t index);
  [[nodiscard]] std::optional<Registration> get(std::size_t index) const;
  /// Every slot, copied under one lock: one consistent view for one operation.
  [[nodiscard]] std::vector<std::optional<Registration>> snapshot() const;
  /// Makes later operations on @p index wait for @p ready, if the slot still holds @p ptr.
  void set_ready(std::size_t index, const void* ptr, SharedEvent ready);

 private:
  mutable std::mutex mutex_;
  std::vector<std::optional<Registration>> slots_;
};

}  // namespace gpuxfer::detail
