// The operator new replacement behind AllocationFault. It allocates with malloc, as libstdc++'s does, and
// the matching deletes free: a sanitizer that intercepts both sees each pair match.
#include "allocation_fault.hpp"

#include <cstdlib>
#include <new>

#include "gpuxfer/options.hpp"

namespace gpuxfer::test {
namespace {

struct FaultState {
  bool armed = false;
  std::size_t skip = 0;
  std::size_t thrown = 0;
};

thread_local FaultState fault;

// Whether this allocation is the one to fail.
bool fails_now() noexcept {
  if (!fault.armed) return false;
  if (fault.skip > 0) {
    --fault.skip;
    return false;
  }
  ++fault.thrown;
  fault.armed = false;
  return true;
}

void* allocate(std::size_t bytes) noexcept {
  if (fails_now()) return nullptr;
  return std::malloc(bytes == 0 ? 1 : bytes);
}

}  // namespace

AllocationFault::AllocationFault(std::size_t skip) noexcept { fault = FaultState{true, skip, 0}; }

AllocationFault::~AllocationFault() { fault.armed = false; }

std::size_t AllocationFault::thrown() const noexcept { return fault.thrown; }

bool allocation_faults_reach_the_library() {
  const AllocationFault fault(0);
  try {
    (void)parse_device_list("0,1");  // its vector is allocated inside the library
  } catch (const std::bad_alloc&) {
  }
  return fault.thrown() > 0;
}

}  // namespace gpuxfer::test

void* operator new(std::size_t bytes) {
  if (void* p = gpuxfer::test::allocate(bytes)) return p;
  throw std::bad_alloc();
}

void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  return gpuxfer::test::allocate(bytes);
}

void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
