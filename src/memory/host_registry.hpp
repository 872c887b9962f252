// The process-wide record of the ranges register_host has page-locked: cudaHostRegister is process-wide,
// so overlaps are refused across managers too, and operations know exactly which bytes they may DMA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace gpuxfer::detail {

class HostRegistry {
 public:
  /// Whether [ptr, ptr + bytes) lies in one registration.
  enum class Cover { whole, partly, none };

  /// Reserves [ptr, ptr + bytes) and page-locks it. @throws Error as register_host does
  void add(std::byte* ptr, std::size_t bytes);
  /// Unlocks and forgets the registration that starts at @p ptr. Never throws.
  void remove(std::byte* ptr) noexcept;
  /// whole: one registration holds all of [ptr, ptr + bytes); partly: @p ptr lies in a registration that
  /// ends early; none: @p ptr is in no registration.
  [[nodiscard]] Cover covers(const void* ptr, std::size_t bytes) const;

 private:
  struct Range {
    std::size_t bytes = 0;
    int device = -1;  // whose primary context page-locked it, and unlocks it
  };

  mutable std::mutex mutex_;
  std::map<std::uintptr_t, Range> ranges_;  // by start
};

/// The one registry of the process (never destroyed: registrations may die during static destruction).
[[nodiscard]] HostRegistry& host_registry();

}  // namespace gpuxfer::detail
