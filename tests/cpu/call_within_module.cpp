// A plug-in for test_deadline.cpp: call_within in an object that the test loads and unloads (dlopen,
// dlclose), to show that a call it leaves running keeps that object loaded.
#include <atomic>
#include <chrono>
#include <thread>

#include "bootstrap/deadline.hpp"

/// Waits @p wait_ms for a call that takes @p call_ms and then sets @p ended: 1 when the call ended in
/// time, 0 when it was left running.
extern "C" __attribute__((visibility("default"))) int gpuxfer_test_call_within(int call_ms, int wait_ms,
                                                                               std::atomic<bool>* ended) {
  using std::chrono::milliseconds;
  const auto value = gpuxfer::detail::call_within(gpuxfer::detail::Deadline(milliseconds(wait_ms)), [=] {
    std::this_thread::sleep_for(milliseconds(call_ms));
    ended->store(true);
    return 1;
  });
  return value.value_or(0);
}
