// BufferRegistry, without a GPU: the same memory registered again (over itself, after a clear, or after
// other memory) keeps the one ordering that an operation which took its snapshot before may still record
// its work in, so that the operations after the registration see that work (review engine F3a). Nothing
// here calls CUDA: the registrations are made by hand, and a copy of an ordering stands for a snapshot.
#include <cstddef>
#include <memory>

#include <gtest/gtest.h>

#include "engine/registry.hpp"

namespace gpuxfer::test {
namespace {

using ::gpuxfer::detail::BufferOrder;
using ::gpuxfer::detail::BufferRegistry;
using ::gpuxfer::detail::ManagerState;
using ::gpuxfer::detail::Registration;

ManagerState& with_one_device(ManagerState& m) {
  m.devices.emplace_back().ordinal = 0;
  return m;
}

// A registry of one device (ordinal 0), which no CUDA call ever sees.
struct OneDevice {
  ManagerState m{Options{}};
  BufferRegistry registry{with_one_device(m)};
};

std::byte memory_x[64];
std::byte memory_y[64];

// A new registration of 64 bytes at @p ptr, with an ordering of its own, as set_device_buffer makes one.
Registration registration_of(std::byte* ptr) {
  Registration reg;
  reg.ptr = ptr;
  reg.size = sizeof memory_x;
  reg.order = std::make_shared<BufferOrder>();
  return reg;
}

TEST(BufferRegistry, TheSameMemoryAgainKeepsTheOrderingASnapshotHolds) {
  OneDevice d;
  d.registry.set(0, registration_of(memory_x));
  const std::shared_ptr<BufferOrder> held = d.registry.get(0)->order;  // an operation's snapshot
  d.registry.set(0, registration_of(memory_x));                          // with another stream, say
  EXPECT_EQ(d.registry.get(0)->order.get(), held.get()) << "an operation of the snapshot records its work where no "
                                               "later operation looks";
}

TEST(BufferRegistry, TheSameMemoryAfterAClearTakesBackTheOrderingASnapshotHolds) {
  OneDevice d;
  d.registry.set(0, registration_of(memory_x));
  const std::shared_ptr<BufferOrder> held = d.registry.get(0)->order;
  d.registry.clear(0);
  d.registry.set(0, registration_of(memory_x));
  EXPECT_EQ(d.registry.get(0)->order.get(), held.get()) << "the snapshot's operation has not begun, so its ordering "
                                               "looked idle when the registration left";
}

TEST(BufferRegistry, TheSameMemoryAfterOtherMemoryTakesBackTheOrderingASnapshotHolds) {
  OneDevice d;
  d.registry.set(0, registration_of(memory_x));
  const std::shared_ptr<BufferOrder> held = d.registry.get(0)->order;
  d.registry.set(0, registration_of(memory_y));
  EXPECT_NE(d.registry.get(0)->order.get(), held.get());  // other memory: an ordering of its own
  d.registry.set(0, registration_of(memory_x));
  EXPECT_EQ(d.registry.get(0)->order.get(), held.get());
}

TEST(BufferRegistry, AnOrderingNothingHoldsIsNotKeptOnceItsRegistrationLeaves) {
  OneDevice d;
  d.registry.set(0, registration_of(memory_x));
  d.registry.clear(0);
  Registration again = registration_of(memory_x);
  const BufferOrder* fresh = again.order.get();
  d.registry.set(0, std::move(again));
  EXPECT_EQ(d.registry.get(0)->order.get(), fresh);
}

}  // namespace
}  // namespace gpuxfer::test
