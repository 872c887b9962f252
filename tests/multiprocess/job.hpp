/// @file job.hpp
/// @brief Building blocks of the rendezvous tests: a rank's LaunchEnv, a patterned blob, a free local port,
///        a temp folder that removes itself.
#pragma once

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "bootstrap/init_address.hpp"
#include "bootstrap/launch_env.hpp"
#include "bootstrap/rendezvous.hpp"
#include "bootstrap/socket.hpp"
#include "fork_ranks.hpp"

namespace gpuxfer::test {

/// One rank's LaunchEnv; @p gpu is the UUID its Hello or claim carries (empty: none known), @p job the
/// job it says it belongs to (empty: none named).
inline detail::LaunchEnv rank_env(int rank, int world, const detail::InitAddress& init,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                  std::string gpu = {}, std::string job = {}) {
  detail::LaunchEnv env;
  env.rank = rank;
  env.world_size = world;
  env.local_rank = rank;
  env.init = init;
  env.timeout = timeout;
  env.launcher = "test";
  env.gpu = std::move(gpu);
  env.job = std::move(job);
  return env;
}

/// A child's body: one rank's exchange_blob (rank 0 offers @p blob), returning what it got.
inline std::function<std::string()> rank_body(const detail::LaunchEnv& env, const std::string& blob) {
  return [env, blob] { return detail::exchange_blob(env, env.rank == 0 ? blob : std::string("ignored")); };
}

/// The bodies of ranks 0 to @p world - 1 of one job.
inline std::vector<std::function<std::string()>> job_bodies(int world, const detail::InitAddress& init,
                                                            const std::string& blob) {
  std::vector<std::function<std::string()>> bodies;
  for (int rank = 0; rank < world; ++rank) bodies.push_back(rank_body(rank_env(rank, world, init), blob));
  return bodies;
}

inline bool contains(const RankOutcome& outcome, const std::string& text) {
  return outcome.text.find(text) != std::string::npos;
}

/// Succeeds when every rank returned @p blob, byte for byte.
inline ::testing::AssertionResult every_rank_got(const std::vector<RankOutcome>& outcomes,
                                                 const std::string& blob) {
  for (std::size_t rank = 0; rank < outcomes.size(); ++rank) {
    if (!outcomes[rank].ok)
      return ::testing::AssertionFailure() << "rank " << rank << ": " << describe(outcomes[rank]);
    if (outcomes[rank].text != blob)
      return ::testing::AssertionFailure() << "rank " << rank << " got other bytes";
  }
  return ::testing::AssertionSuccess();
}

/// Succeeds when every rank threw Errc::comm_error with every one of @p texts in its message.
inline ::testing::AssertionResult every_rank_failed_with(const std::vector<RankOutcome>& outcomes,
                                                         std::initializer_list<std::string> texts) {
  for (std::size_t rank = 0; rank < outcomes.size(); ++rank) {
    if (outcomes[rank].code != "comm_error") {
      return ::testing::AssertionFailure() << "child " << rank << ": " << describe(outcomes[rank]);
    }
    for (const std::string& text : texts) {
      if (!contains(outcomes[rank], text)) {
        return ::testing::AssertionFailure()
               << "child " << rank << " does not say '" << text << "': " << outcomes[rank].text;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

/// 128 bytes (an NCCL unique id's size) that depend on @p seed, with zeros and newlines among them.
inline std::string pattern_blob(unsigned seed, std::size_t bytes = 128) {
  std::string blob(bytes, '\0');
  for (std::size_t i = 0; i < bytes; ++i) blob[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 3)) & 0xff);
  blob[5] = '\n';
  blob[9] = '\0';
  return blob;
}

/// tcp://127.0.0.1:<a port free a moment ago>: the tests never use another address.
inline detail::InitAddress local_tcp() {
  return detail::parse_init_address("tcp://127.0.0.1:" + std::to_string(detail::pick_free_port("127.0.0.1")),
                                    "test");
}

/// A fresh folder under TMPDIR (or /tmp), removed with everything in it at the end of the scope.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/gpuxfer-rendezvous-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  /// file://<folder>/<name>
  [[nodiscard]] detail::InitAddress file(const std::string& name) const {
    return detail::parse_init_address("file://" + path_ + "/" + name, "test");
  }
  [[nodiscard]] bool empty() const { return std::filesystem::is_empty(path_); }

 private:
  std::string path_;
};

}  // namespace gpuxfer::test
