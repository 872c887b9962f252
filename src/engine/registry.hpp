// The per-device "last registered buffer" slots, and the consistent view of them that one operation
// works on.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "engine/device_range.hpp"
#include "engine/ordering.hpp"
#include "node/manager_state.hpp"
#include "runtime/driver_api.hpp"

namespace gpuxfer::detail {

/// A registered buffer: where it is, the allocation it lies in (to notice a free), the stream it belongs
/// to, and gpuxfer's work on its memory.
struct Registration {
  void* ptr = nullptr;
  std::size_t size = 0;
  AddressRange allocation;
  cudaStream_t stream = cudaStreamLegacy;
  std::shared_ptr<BufferOrder> order;
};

/// The registrations of every device, as one operation sees them: taken under one lock, each re-checked
/// against a free only when the operation asks for its range.
class RegistrySnapshot {
 public:
  RegistrySnapshot(const ManagerState& m, std::vector<std::optional<Registration>> slots)
      : m_(m), slots_(std::move(slots)) {}

  [[nodiscard]] std::size_t size() const noexcept { return slots_.size(); }

  /// The range registered on @p device, re-checked.
  /// @throws Error(Errc::invalid_buffer) naming @p op when nothing is registered there or it was freed
  [[nodiscard]] DeviceRange require(std::size_t device, const char* op) const;

  /// The re-checked range of every device but @p skip, ascending; nullopt where nothing is registered.
  /// @throws Error(Errc::invalid_buffer) when a registered buffer was freed
  [[nodiscard]] std::vector<std::optional<DeviceRange>> present(std::optional<std::size_t> skip) const;

 private:
  const ManagerState& m_;
  std::vector<std::optional<Registration>> slots_;
};

/// Throws Error(Errc::invalid_argument) naming @p op when @p bytes do not fit @p dst.
void check_fits(const ManagerState& m, std::size_t bytes, const DeviceRange& dst, const char* op);

/// The registrations of every device. The same memory registered again on a slot keeps its ordering
/// (BufferOrder), whatever its new stream: over itself, and after a clear or other memory while gpuxfer's
/// work on it is in flight or an operation's snapshot still holds it. So an operation that took its
/// snapshot before the registration records its work where the operations after it look, and set never
/// waits for an operation (it takes no ordering's lock).
class BufferRegistry {
 public:
  explicit BufferRegistry(const ManagerState& m) : m_(m), slots_(m.size()), retired_(m.size()) {}

  void set(std::size_t index, Registration reg);
  void clear(std::size_t index);
  [[nodiscard]] std::optional<Registration> get(std::size_t index) const;
  /// Every slot, copied under one lock: one consistent view for one operation.
  [[nodiscard]] RegistrySnapshot snapshot() const;

 private:
  /// Keeps @p reg's ordering on slot @p index while gpuxfer's work on it is in flight or a snapshot holds
  /// it (dropping those of which neither is true, and an older one of the same memory). Under the lock.
  void retire(std::size_t index, const Registration& reg);

  const ManagerState& m_;
  mutable std::mutex mutex_;
  std::vector<std::optional<Registration>> slots_;
  /// Per slot: the orderings of registrations gone from it, by pointer, still in use.
  std::vector<std::vector<std::pair<void*, std::shared_ptr<BufferOrder>>>> retired_;
};

}  // namespace gpuxfer::detail
