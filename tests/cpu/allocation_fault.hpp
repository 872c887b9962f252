// Out of memory on demand, for the CPU tests: this binary replaces the global operator new, and an
// AllocationFault makes a chosen allocation of the thread that holds it throw std::bad_alloc. The other
// threads, and this one before and after, allocate as usual.
#pragma once

#include <cstddef>

namespace gpuxfer::test {

/// While it lives, allocation number @p skip + 1 (counted from now, on this thread) throws std::bad_alloc;
/// the others succeed.
class AllocationFault {
 public:
  explicit AllocationFault(std::size_t skip) noexcept;
  ~AllocationFault();
  AllocationFault(const AllocationFault&) = delete;
  AllocationFault& operator=(const AllocationFault&) = delete;

  /// How many allocations threw: 0 or 1.
  [[nodiscard]] std::size_t thrown() const noexcept;
};

}  // namespace gpuxfer::test
