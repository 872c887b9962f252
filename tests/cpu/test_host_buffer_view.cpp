// HostBuffers that view memory owned elsewhere (what gather_to_host returns), without a GPU: the owner
// stays alive as long as a view holds it and is let go on reset, destruction and move-assignment; size,
// span, shrink and to_vector read the viewed bytes.
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <gpuxfer/host_buffer.hpp>

#include "memory/host_buffer_view.hpp"

namespace gpuxfer {
namespace {

// An owner of bytes that says when it is gone.
struct Owner {
  std::vector<std::byte> bytes;
  bool* gone;
  Owner(std::size_t size, bool* flag) : bytes(size), gone(flag) {
    for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>(i * 7 + 3);
  }
  ~Owner() { *gone = true; }
};

TEST(HostBufferView, ReadsTheViewedBytesAndKeepsTheOwnerUntilReset) {
  bool gone = false;
  auto owner = std::make_shared<Owner>(64, &gone);
  std::byte* at = owner->bytes.data() + 16;
  HostBuffer view = detail::host_buffer_view(owner, at, 20);
  owner.reset();
  EXPECT_FALSE(gone) << "the view keeps its owner alive";
  EXPECT_EQ(view.data(), at);
  EXPECT_EQ(view.size(), 20u);
  EXPECT_FALSE(view.empty());
  EXPECT_EQ(view.span().data(), at);
  EXPECT_EQ(view.span().size(), 20u);
  const std::vector<std::byte> copy = view.to_vector();
  ASSERT_EQ(copy.size(), 20u);
  for (std::size_t i = 0; i < copy.size(); ++i) EXPECT_EQ(copy[i], static_cast<std::byte>((i + 16) * 7 + 3));
  view.shrink(30);
  EXPECT_EQ(view.size(), 20u) << "shrink never grows";
  view.shrink(5);
  EXPECT_EQ(view.size(), 5u);
  EXPECT_EQ(std::as_const(view).span().size(), 5u);
  EXPECT_FALSE(gone) << "shrink keeps the owner";
  view.reset();
  EXPECT_TRUE(gone);
  EXPECT_TRUE(view.empty());
  EXPECT_EQ(view.data(), nullptr);
  view.reset();  // twice is harmless
}

TEST(HostBufferView, DestructionLetsGoOfTheOwnerOnceEveryViewIsGone) {
  bool gone = false;
  auto owner = std::make_shared<Owner>(32, &gone);
  {
    const HostBuffer first = detail::host_buffer_view(owner, owner->bytes.data(), 8);
    {
      const HostBuffer second = detail::host_buffer_view(owner, owner->bytes.data() + 8, 8);
      owner.reset();
    }
    EXPECT_FALSE(gone) << "one view is left";
  }
  EXPECT_TRUE(gone);
}

TEST(HostBufferView, MovesCarryTheOwnerAndMoveAssignmentDropsTheOldOne) {
  bool first_gone = false;
  bool second_gone = false;
  auto first_owner = std::make_shared<Owner>(16, &first_gone);
  auto second_owner = std::make_shared<Owner>(16, &second_gone);
  HostBuffer first = detail::host_buffer_view(std::move(first_owner), nullptr, 0);
  HostBuffer moved(std::move(first));
  EXPECT_FALSE(first_gone) << "the move hands the owner over";
  EXPECT_TRUE(first.empty());
  first.reset();
  EXPECT_FALSE(first_gone) << "the moved-from buffer holds nothing";
  std::byte* at = second_owner->bytes.data();
  HostBuffer other = detail::host_buffer_view(std::move(second_owner), at, 16);
  moved = std::move(other);
  EXPECT_TRUE(first_gone) << "move-assignment lets go of what the target held";
  EXPECT_FALSE(second_gone);
  EXPECT_EQ(moved.data(), at);
  EXPECT_EQ(moved.size(), 16u);
  EXPECT_EQ(other.data(), nullptr);
  EXPECT_EQ(other.size(), 0u);
  moved = HostBuffer{};
  EXPECT_TRUE(second_gone);
}

}  // namespace
}  // namespace gpuxfer
