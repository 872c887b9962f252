// The shared-memory segment of gather_to_host without a GPU: created, mapped a second time (a part or all
// of it, in this process and in a forked child), sized in pages, unlinked on every path, named uniquely,
// and its errors.
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <csignal>

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <gpuxfer/testing/pattern.hpp>

#include "common/expect_error.hpp"
#include "common/other_user.hpp"
#include "hostops/shared_segment.hpp"

namespace gpuxfer {
namespace {

using detail::SharedSegment;
using test::throws_error;

// A name no other test run uses: this process's pid, a nonce from the test's name, a count.
std::string fresh_name() {
  static std::uint64_t call = 0;
  return detail::shared_segment_name(static_cast<std::uint64_t>(::getpid()), 0x7e57, call++);
}

bool exists(const std::string& name) {
  struct stat info {};
  return ::stat(("/dev/shm" + name).c_str(), &info) == 0;
}

TEST(SharedSegment, NamesAreUniquePerProcessNonceAndCall) {
  std::set<std::string> names;
  for (std::uint64_t pid : {1ull, 2ull}) {
    for (std::uint64_t nonce : {0ull, 0xffffffffffffffffull}) {
      for (std::uint64_t call : {0ull, 1ull}) names.insert(detail::shared_segment_name(pid, nonce, call));
    }
  }
  EXPECT_EQ(names.size(), 8u);
  const std::string longest = detail::shared_segment_name(4194304, 0xffffffffffffffffull, ~0ull);
  EXPECT_EQ(longest.front(), '/');
  EXPECT_EQ(longest.find('/', 1), std::string::npos) << longest;
  EXPECT_LT(longest.size(), 255u) << longest;
  EXPECT_NE(longest.find("ffffffffffffffff"), std::string::npos) << longest;
}

TEST(SharedSegment, PagesRoundUp) {
  const std::size_t page = detail::page_size();
  EXPECT_GE(page, 4096u);
  EXPECT_EQ(detail::round_to_pages(0), 0u);
  EXPECT_EQ(detail::round_to_pages(1), page);
  EXPECT_EQ(detail::round_to_pages(page), page);
  EXPECT_EQ(detail::round_to_pages(page + 1), 2 * page);
}

TEST(SharedSegment, ASecondMappingSeesTheSameBytesAndTheCreatorUnlinks) {
  const std::string name = fresh_name();
  const std::size_t page = detail::page_size();
  const std::size_t bytes = 3 * page + 7;
  {
    SharedSegment segment = SharedSegment::create(name, bytes);
    EXPECT_TRUE(segment.owner());
    EXPECT_EQ(segment.size(), bytes);
    EXPECT_EQ(segment.name(), name);
    ASSERT_NE(segment.data(), nullptr);
    EXPECT_TRUE(exists(name));
    struct stat info {};
    ASSERT_EQ(::stat(("/dev/shm" + name).c_str(), &info), 0);
    EXPECT_EQ(static_cast<std::size_t>(info.st_size), 4 * page);
    // Another mapping of the part from page 2 on: what it writes, the creator reads, and back.
    SharedSegment part = SharedSegment::open(name, 2 * page, page + 7);
    EXPECT_FALSE(part.owner());
    EXPECT_EQ(part.size(), page + 7);
    pattern::fill_host({part.data(), part.size()}, 11);
    EXPECT_EQ(pattern::count_mismatches_host({segment.data() + 2 * page, page + 7}, 11), 0u);
    pattern::fill_host({segment.data(), page}, 12);
    SharedSegment head = SharedSegment::open(name, 0, page);
    EXPECT_EQ(pattern::count_mismatches_host({head.data(), page}, 12), 0u);
    part.reset();
    EXPECT_TRUE(exists(name)) << "only the creator unlinks";
  }
  EXPECT_FALSE(exists(name));
  EXPECT_TRUE(
      throws_error([&] { (void)SharedSegment::open(name, 0, 1); }, Errc::comm_error, name, "shm_open"));
}

TEST(SharedSegment, AForkedProcessWritesItsPart) {
  const std::string name = fresh_name();
  const std::size_t page = detail::page_size();
  SharedSegment segment = SharedSegment::create(name, 2 * page);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 0;
    try {
      SharedSegment part = SharedSegment::open(name, page, page);
      pattern::fill_host({part.data(), part.size()}, 21);
    } catch (...) {
      code = 1;
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child could not map its part";
  EXPECT_EQ(pattern::count_mismatches_host({segment.data() + page, page}, 21), 0u);
}

// A child process creates a segment of its own and tells the parent its name; @p end then ends it: by
// SIGKILL (no destructor runs, as for a rank that gpuxfer launch stops with SIGTERM, a crash or the OOM
// killer) or, when the parent writes to the pipe, by returning normally.
struct CreatorChild {
  pid_t pid = -1;
  int to_child = -1;
  std::string name;
};

CreatorChild start_creator() {
  int up[2];
  int down[2];
  if (::pipe(up) != 0 || ::pipe(down) != 0) return {};
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(up[0]);
    ::close(down[1]);
    int code = 0;
    try {
      const std::string name = fresh_name();
      SharedSegment segment = SharedSegment::create(name, 1 << 20);
      const std::size_t length = name.size();
      if (::write(up[1], &length, sizeof length) != sizeof length) code = 2;
      if (::write(up[1], name.data(), length) != static_cast<ssize_t>(length)) code = 2;
      char go = 0;
      if (::read(down[0], &go, 1) != 1) code = 3;
    } catch (...) {
      code = 1;
    }
    ::_exit(code);
  }
  ::close(up[1]);
  ::close(down[0]);
  CreatorChild c{child, down[1], {}};
  std::size_t length = 0;
  if (child > 0 && ::read(up[0], &length, sizeof length) == sizeof length && length < 256) {
    c.name.resize(length);
    if (::read(up[0], c.name.data(), length) != static_cast<ssize_t>(length)) c.name.clear();
  }
  ::close(up[0]);
  return c;
}

int reap(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, 0) == pid ? status : -1;
}

// A segment whose creator died without unlinking it would hold its memory in /dev/shm until reboot: the
// next segment created on the node removes it. A live creator's segment, and this process's own, stay.
TEST(SharedSegment, ASegmentLeftByAKilledCreatorIsRemovedByTheNextCreation) {
  CreatorChild dead = start_creator();
  ASSERT_GT(dead.pid, 0);
  ASSERT_FALSE(dead.name.empty()) << "the child could not create its segment";
  CreatorChild alive = start_creator();
  ASSERT_GT(alive.pid, 0);
  ASSERT_FALSE(alive.name.empty()) << "the second child could not create its segment";
  ::kill(dead.pid, SIGKILL);
  const int killed = reap(dead.pid);
  EXPECT_TRUE(WIFSIGNALED(killed) && WTERMSIG(killed) == SIGKILL);
  ::close(dead.to_child);
  // SIGKILL ran no destructor, so the name is still there, unless a test process beside this one has
  // already created a segment and removed it.
  const SharedSegment own = SharedSegment::create(fresh_name(), 4096);
  const SharedSegment next = SharedSegment::create(fresh_name(), 4096);
  EXPECT_FALSE(exists(dead.name)) << dead.name << " outlived its killed creator";
  EXPECT_TRUE(exists(alive.name)) << "a live creator's segment was removed";
  EXPECT_TRUE(exists(own.name())) << "this process's own segment was removed";
  const char go = 1;
  EXPECT_EQ(::write(alive.to_child, &go, 1), 1);
  ::close(alive.to_child);
  const int ended = reap(alive.pid);
  EXPECT_TRUE(WIFEXITED(ended) && WEXITSTATUS(ended) == 0);
  EXPECT_FALSE(exists(alive.name)) << "its creator unlinks it on the way out";
}

// How a rank of the root's node caches a segment: all of it, its size from the file; a forked child
// writes through such a mapping, the creator reads, and the name goes on every path.
TEST(SharedSegment, AWholeMappingTakesItsSizeFromTheSegment) {
  const std::string name = fresh_name();
  const std::size_t page = detail::page_size();
  {
    const SharedSegment segment = SharedSegment::create(name, 3 * page);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      int code = 0;
      try {
        const SharedSegment whole = SharedSegment::open(name);
        if (whole.size() != 3 * page || whole.owner() || whole.name() != name) code = 2;
        pattern::fill_host({whole.data() + page, 2 * page}, 31);
      } catch (...) {
        code = 1;
      }
      ::_exit(code);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "the child did not exit";
    ASSERT_EQ(WEXITSTATUS(status), 0) << "1: could not map the segment; 2: wrong size, owner or name";
    EXPECT_EQ(pattern::count_mismatches_host({segment.data() + page, 2 * page}, 31), 0u);
    SharedSegment whole = SharedSegment::open(name);
    EXPECT_EQ(whole.size(), 3 * page);
    EXPECT_EQ(pattern::count_mismatches_host({whole.data() + page, 2 * page}, 31), 0u);
    whole.reset();
    EXPECT_TRUE(exists(name)) << "only the creator unlinks";
  }
  EXPECT_FALSE(exists(name));
  EXPECT_TRUE(throws_error([&] { (void)SharedSegment::open(name); }, Errc::comm_error, name, "shm_open",
                           "same /dev/shm"));
}

TEST(SharedSegment, AWholeMappingOfAnEmptySegmentMapsNothing) {
  const std::string name = fresh_name();
  {
    const SharedSegment segment = SharedSegment::create(name, 0);
    const SharedSegment whole = SharedSegment::open(name);
    EXPECT_EQ(whole.data(), nullptr);
    EXPECT_EQ(whole.size(), 0u);
  }
  EXPECT_FALSE(exists(name));
}

TEST(SharedSegment, MovesHandOverTheNameOnce) {
  const std::string name = fresh_name();
  SharedSegment moved;
  {
    SharedSegment segment = SharedSegment::create(name, 100);
    moved = std::move(segment);
    EXPECT_EQ(segment.data(), nullptr);
    EXPECT_TRUE(segment.name().empty());
  }
  EXPECT_TRUE(exists(name)) << "the moved-from segment must not unlink";
  moved.reset();
  EXPECT_FALSE(exists(name));
  moved.reset();  // twice is harmless
}

TEST(SharedSegment, AnExceptionStillUnlinks) {
  const std::string name = fresh_name();
  try {
    const SharedSegment segment = SharedSegment::create(name, 1);
    throw std::runtime_error("a failure after creating it");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(exists(name));
}

TEST(SharedSegment, AnEmptySegmentMapsNothing) {
  const std::string name = fresh_name();
  {
    SharedSegment segment = SharedSegment::create(name, 0);
    EXPECT_EQ(segment.data(), nullptr);
    EXPECT_EQ(segment.size(), 0u);
    const SharedSegment part = SharedSegment::open(name, 0, 0);
    EXPECT_EQ(part.data(), nullptr);
  }
  EXPECT_FALSE(exists(name));
}

TEST(SharedSegment, RefusesAnExistingNameABadOffsetAndTooFewBytes) {
  const std::string name = fresh_name();
  const std::size_t page = detail::page_size();
  const SharedSegment segment = SharedSegment::create(name, page);
  EXPECT_TRUE(throws_error([&] { (void)SharedSegment::create(name, page); }, Errc::comm_error, name,
                           "shm_open", "File exists"));
  EXPECT_TRUE(exists(name)) << "a refused create must not unlink the existing segment";
  EXPECT_TRUE(throws_error([&] { (void)SharedSegment::open(name, 1, 1); }, Errc::invalid_argument,
                           "not a multiple of the page size"));
  EXPECT_TRUE(throws_error([&] { (void)SharedSegment::open(name, page, 1); }, Errc::comm_error,
                           "holds only " + std::to_string(page) + " bytes"));
  EXPECT_TRUE(throws_error([&] { (void)SharedSegment::create("/gpuxfer/no-slash-allowed", 1); },
                           Errc::comm_error, "shm_open"));
}

// Names taken before the creator comes (the ids 0, 1, 2 that it once took in turn, made first by this user
// and by another) do not stop a creation: it takes another id. Sixteen taken names in a row are an error
// that says so. The ids it draws by itself are random, below 2^63.
TEST(SharedSegment, NamesTakenBeforeDoNotStopACreation) {
  const auto pid = static_cast<std::uint64_t>(::getpid());
  const std::uint64_t nonce = 0x5917;
  std::vector<SharedSegment> squatted;
  for (std::uint64_t id = 0; id < 2; ++id) {
    squatted.push_back(SharedSegment::create(detail::shared_segment_name(pid, nonce, id), 4096));
  }
  const std::string others = detail::shared_segment_name(pid, nonce, 2);
  const bool other_user = test::other_user_unavailable("/dev/shm").empty();
  if (other_user) {
    ASSERT_EQ(test::other_user_run("head -c 4096 /dev/zero > /dev/shm" + others), 0);
  } else {
    squatted.push_back(SharedSegment::create(others, 4096));
  }
  std::uint64_t next = 0;
  {
    const detail::NamedSegment made =
        SharedSegment::create_at_random_name(pid, nonce, 4096, [&] { return next++; });
    EXPECT_EQ(made.id, 3u);
    EXPECT_EQ(made.segment.name(), detail::shared_segment_name(pid, nonce, 3));
    EXPECT_TRUE(made.segment.owner());
    EXPECT_NE(made.segment.data(), nullptr);
  }
  EXPECT_TRUE(throws_error(
      [&] { (void)SharedSegment::create_at_random_name(pid, nonce, 4096, [] { return std::uint64_t{1}; }); },
      Errc::comm_error, "16 random names in a row existed already"));
  if (other_user) ::shm_unlink(others.c_str());
  std::set<std::uint64_t> ids;
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t id = detail::random_segment_id();
    EXPECT_LT(id, std::uint64_t{1} << 63);
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 64u);
  const detail::NamedSegment drawn = SharedSegment::create_at_random_name(pid, nonce, 4096);
  EXPECT_EQ(drawn.segment.name(), detail::shared_segment_name(pid, nonce, drawn.id));
}

// A segment at a gpuxfer name that another user made (and opened to all) is not opened: a rank would read
// and write that user's memory as the root's.
TEST(SharedSegment, ASegmentOfAnotherUserIsRefused) {
  if (const std::string why = test::other_user_unavailable("/dev/shm"); !why.empty()) GTEST_SKIP() << why;
  const std::string name = fresh_name();
  ASSERT_EQ(
      test::other_user_run("head -c 8192 /dev/zero > /dev/shm" + name + " && chmod 666 /dev/shm" + name), 0);
  EXPECT_TRUE(throws_error([&] { (void)SharedSegment::open(name); }, Errc::comm_error, name,
                           "belongs to another user (uid 65534)"));
  EXPECT_TRUE(throws_error([&] { (void)SharedSegment::open(name, 0, 4096); }, Errc::comm_error, name,
                           "belongs to another user (uid 65534)"));
  ::shm_unlink(name.c_str());
}

}  // namespace
}  // namespace gpuxfer
