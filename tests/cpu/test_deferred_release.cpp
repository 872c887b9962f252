// DeferredRelease, without a GPU: what it is given is dropped on a thread of its own, in order, and
// drain() and the destructor return only once everything handed over is gone; drain_for gives up at its
// limit.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/deferred_release.hpp"

namespace gpuxfer::test {
namespace {

using ::gpuxfer::detail::DeferredRelease;

// Records, when destroyed, which thread destroyed it and in what order; its destruction takes @p hold.
struct Recorder {
  std::mutex& mutex;
  std::vector<int>& order;
  std::vector<std::thread::id>& threads;
  int id;
  std::chrono::milliseconds hold{0};
  ~Recorder() {
    std::this_thread::sleep_for(hold);
    std::lock_guard lock(mutex);
    order.push_back(id);
    threads.push_back(std::this_thread::get_id());
  }
};

TEST(DeferredRelease, DropsOnAThreadOfItsOwnInOrderAndDrainWaits) {
  std::mutex mutex;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  DeferredRelease release;
  for (int i = 0; i < 5; ++i) {
    // The first takes a while: the call hands it over and returns long before.
    const auto hold = std::chrono::milliseconds(i == 0 ? 200 : 0);
    auto object = std::shared_ptr<Recorder>(new Recorder{mutex, order, threads, i, hold});
    const auto start = std::chrono::steady_clock::now();
    release.release(std::move(object));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100)) << "release " << i;
  }
  release.drain();
  std::lock_guard lock(mutex);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  for (const std::thread::id id : threads) EXPECT_NE(id, std::this_thread::get_id());
}

TEST(DeferredRelease, TheDestructorDropsWhatIsStillQueued) {
  std::mutex mutex;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  {
    DeferredRelease release;
    release.release(
        std::shared_ptr<Recorder>(new Recorder{mutex, order, threads, 7, std::chrono::milliseconds(100)}));
    release.release(
        std::shared_ptr<Recorder>(new Recorder{mutex, order, threads, 8, std::chrono::milliseconds(0)}));
  }
  std::lock_guard lock(mutex);
  EXPECT_EQ(order, (std::vector<int>{7, 8}));
}

// drain_for gives up at its limit while an object's destructor still runs (one that waits for GPU work that
// never ends), and succeeds once it is done.
TEST(DeferredRelease, DrainForGivesUpAtItsLimit) {
  std::mutex mutex;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  DeferredRelease release;
  EXPECT_TRUE(release.drain_for(std::chrono::milliseconds(0))) << "nothing handed over";
  release.release(
      std::shared_ptr<Recorder>(new Recorder{mutex, order, threads, 1, std::chrono::milliseconds(500)}));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(release.drain_for(std::chrono::milliseconds(50)));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(50));
  EXPECT_LT(waited, std::chrono::milliseconds(400)) << "it waited for the destructor";
  EXPECT_TRUE(release.drain_for(std::chrono::seconds(5)));
  std::lock_guard lock(mutex);
  EXPECT_EQ(order, (std::vector<int>{1}));
}

TEST(DeferredRelease, AnObjectHeldElsewhereStaysAndNothingIsNoWork) {
  DeferredRelease release;
  release.release(nullptr);
  release.drain();  // returns: nothing was handed over, no thread started
  auto shared = std::make_shared<int>(42);
  release.release(shared);  // another holder remains
  release.drain();
  EXPECT_EQ(shared.use_count(), 1);
  EXPECT_EQ(*shared, 42);
}

}  // namespace
}  // namespace gpuxfer::test
