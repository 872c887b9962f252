// Out of memory on demand, for the CPU tests: this binary replaces the global operator new, and an
// AllocationFault makes a chosen allocation of the thread that holds it throw std::bad_alloc. The other
// threads, and this one before and after, allocate as usual. The replacement reaches libgpuxfer's
// allocations only where the library calls the process's operator new: a toolchain that links libstdc++
// into the library statically leaves the library its own copy, kept local by its version script (see
// allocation_faults_reach_the_library).
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

/// Whether an AllocationFault reaches what libgpuxfer allocates (it makes the library allocate once).
/// Tests of the library's out-of-memory paths skip where it does not.
[[nodiscard]] bool allocation_faults_reach_the_library();

/// The reason such a test gives when it skips.
inline constexpr const char* library_allocates_on_its_own =
    "libgpuxfer.so allocates with its own operator new (its toolchain linked libstdc++ into it), which "
    "this binary's replacement does not reach";

}  // namespace gpuxfer::test
