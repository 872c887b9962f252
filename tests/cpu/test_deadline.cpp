// Deadline, which bounds every wait of a rendezvous and of NCCL: a timeout too long for the steady clock
// (a caller's "no timeout": milliseconds::max(), Python's timedelta.max) is a deadline never reached,
// not an overflow that has expired at once; call_within, which bounds a call that cannot bound itself.
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "bootstrap/deadline.hpp"

namespace gpuxfer::detail {
namespace {

using std::chrono::milliseconds;

TEST(Deadline, AnOrdinaryTimeoutExpiresAfterIt) {
  const Deadline soon(milliseconds(1));
  EXPECT_LE(soon.poll_ms(), 1);
  const Deadline later(milliseconds(60'000));
  EXPECT_FALSE(later.expired());
  EXPECT_EQ(later.poll_ms(), 1000);  // capped
  EXPECT_EQ(later.poll_ms(milliseconds(5)), 5);
}

TEST(Deadline, ATimeoutBeyondTheClocksRangeNeverExpires) {
  // 300 years, Python's timedelta.max in milliseconds, and the largest milliseconds there are.
  for (const milliseconds timeout : {milliseconds(std::chrono::hours(24 * 365 * 300)),
                                     milliseconds(86'399'999'999'999'999LL), milliseconds::max()}) {
    const Deadline d(timeout);
    EXPECT_FALSE(d.expired()) << timeout.count() << " ms";
    EXPECT_EQ(d.poll_ms(), 1000) << timeout.count() << " ms";
    EXPECT_EQ(d.timeout(), timeout);
  }
}

TEST(Deadline, ALongerWaitThanTheTimeoutSaturates) {
  const Deadline d(milliseconds::max(), std::chrono::seconds(1));
  EXPECT_FALSE(d.expired());
  EXPECT_EQ(d.timeout(), milliseconds::max());
}

// The extra time is the waiter's own margin: an error says the timeout the user set, not timeout + extra.
TEST(Deadline, AnExtendedDeadlineDescribesTheTimeoutItWasGiven) {
  const Deadline d(milliseconds(2000), std::chrono::seconds(1));
  EXPECT_EQ(d.timeout(), milliseconds(2000));
  EXPECT_EQ(d.describe(), "2 s (GPUXFER_TIMEOUT)");
  EXPECT_GT(d.poll_ms(milliseconds(10'000)), 2500) << "still ends a second after the timeout";
}

TEST(CallWithin, ACallThatEndsInTimeGivesItsValue) {
  const auto value = call_within(Deadline(milliseconds(5000)), [] { return std::string("resolved"); });
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(*value, "resolved");
}

// A resolver that does not answer: the wait ends at the deadline, the call goes on alone to its end and
// writes only into what its thread holds (run under ASan, a write into the caller's frame would show).
TEST(CallWithin, ACallThatDoesNotEndIsLeftAtTheDeadline) {
  auto ended = std::make_shared<std::atomic<bool>>(false);
  const auto start = std::chrono::steady_clock::now();
  const auto value = call_within(Deadline(milliseconds(100)), [ended] {
    std::this_thread::sleep_for(milliseconds(800));
    ended->store(true);
    return std::string(1000, 'x');
  });
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(value.has_value());
  EXPECT_GE(took, milliseconds(100));
  EXPECT_LT(took, milliseconds(600)) << "waited for the call rather than the deadline";
  EXPECT_FALSE(ended->load());
  for (int i = 0; i < 200 && !ended->load(); ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(ended->load()) << "the call was not left to end";
}

TEST(CallWithin, WhatTheCallThrowsIsRethrown) {
  EXPECT_THROW((void)call_within(Deadline(milliseconds(5000)),
                                 []() -> int { throw std::runtime_error("resolver broke"); }),
               std::runtime_error);
}

// A program that unloads the object holding call_within (dlclose) while a call it left is still running:
// the object stays loaded, so that the call's thread does not run into unmapped code when it wakes.
TEST(CallWithin, TheObjectOfACallLeftRunningStaysLoadedThroughDlclose) {
  void* module = dlopen(GPUXFER_CALL_WITHIN_MODULE, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(module, nullptr) << dlerror();
  using Call = int (*)(int, int, std::atomic<bool>*);
  const auto call = reinterpret_cast<Call>(dlsym(module, "gpuxfer_test_call_within"));
  ASSERT_NE(call, nullptr) << dlerror();
  static std::atomic<bool> ended{false};
  EXPECT_EQ(call(600, 50, &ended), 0) << "the call ended within the wait";
  EXPECT_FALSE(ended.load());
  EXPECT_EQ(dlclose(module), 0) << dlerror();
  void* still = dlopen(GPUXFER_CALL_WITHIN_MODULE, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(still, nullptr) << "dlclose unloaded the object while a call it left was running in it";
  for (int i = 0; i < 300 && !ended.load(); ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(ended.load()) << "the call left running never ended";
  std::this_thread::sleep_for(milliseconds(100));  // its thread past the rest of its code
  if (still != nullptr) dlclose(still);
}

}  // namespace
}  // namespace gpuxfer::detail
