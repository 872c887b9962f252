#include "comm/file_rendezvous.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gpuxfer/error.hpp>

#include "comm/deadline.hpp"
#include "comm/rendezvous.hpp"
#include "comm/socket.hpp"
#include "comm/wire.hpp"
#include "runtime/log.hpp"

namespace gpuxfer::detail {
namespace {

constexpr std::chrono::milliseconds poll_interval{20};
constexpr const char* header = "gpuxfer-rendezvous 1";

[[noreturn]] void comm_fail(const std::string& message) { throw Error(Errc::comm_error, message); }

bool exists(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0;
}

std::optional<std::string> read_whole(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return std::nullopt;
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// Writes @p text to a temp file beside @p path and publishes it: renamed over @p path (replace) or linked
// to it (exclusive: false when @p path exists already).
bool publish(const std::string& path, const std::string& text, bool exclusive) {
  const std::string temp = path + ".tmp" + std::to_string(getpid());
  {
    const UniqueFd fd(open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd)
      comm_fail("cannot write " + temp + " (" + std::strerror(errno) +
                "): GPUXFER_INIT's folder must be writable");
    if (write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      comm_fail("cannot write " + temp + " (" + std::strerror(errno) + ")");
    }
  }
  const bool done =
      exclusive ? link(temp.c_str(), path.c_str()) == 0 : rename(temp.c_str(), path.c_str()) == 0;
  const int error = errno;
  unlink(temp.c_str());
  if (!done && !(exclusive && error == EEXIST))
    comm_fail("cannot create " + path + " (" + std::strerror(error) + ")");
  return done;
}

// "key value" lines of a claim or of the result file's head.
std::string field(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.starts_with(key + " ")) return line.substr(key.size() + 1);
    if (line.starts_with("blob ")) break;  // the blob's bytes follow: no field in there
  }
  return {};
}

class FileRendezvous {
 public:
  explicit FileRendezvous(const LaunchEnv& env) : env_(env), path_(env.init.path), deadline_(env.timeout) {}

  std::string run(const std::string& blob) {
    if (exists(path_)) {
      comm_fail(path_ + " exists already, left by an earlier job: remove " + path_ +
                "* or use a new path in GPUXFER_INIT");
    }
    claim();
    if (env_.rank == 0) {
      serve(blob);
      return blob;
    }
    std::string result = wait_for_result();
    publish(rank_file("done", env_.rank), "done\n", false);
    return result;
  }

 private:
  std::string rank_file(const char* kind, int rank) const {
    return path_ + "." + kind + std::to_string(rank);
  }

  std::string claim_text() const {
    return "world_size " + std::to_string(env_.world_size) + "\nlocal_rank " +
           std::to_string(env_.local_rank) + "\nhost " + local_host_name() + "\ngpu " + env_.gpu + "\njob " +
           env_.job + "\n";
  }

  void claim() {
    if (!publish(rank_file("rank", env_.rank), claim_text(), true)) {
      comm_fail(
          "rank " + std::to_string(env_.rank) + " is claimed twice (" + rank_file("rank", env_.rank) +
          " exists: another process has this rank, or an earlier job left it): every process needs its own "
          "GPUXFER_RANK, and a new job needs a new GPUXFER_INIT path or " +
          path_ + "* removed");
    }
  }

  // "rank 2 (local rank 0 on node-a)", as the TCP rendezvous names a rank.
  static std::string who(int rank, const std::string& claim) {
    return "rank " + std::to_string(rank) + " (local rank " + field(claim, "local_rank") + " on " +
           field(claim, "host") + ")";
  }

  void serve(const std::string& blob) {
    RankList missing;
    std::map<std::string, std::string> gpus;  // GPU -> the rank that drives it (ranks that know theirs)
    if (!env_.gpu.empty()) gpus.emplace(env_.gpu, who(0, claim_text()));
    for (int rank = 1; rank < env_.world_size; ++rank) {
      std::optional<std::string> claim;
      while (!(claim = read_whole(rank_file("rank", rank))) && !deadline_.expired()) {
        std::this_thread::sleep_for(poll_interval);
      }
      if (!claim) {
        missing.add(rank);
        continue;
      }
      // Before anything else: a claim of another job must not join this one (this rank 0 and another
      // job's rank would form one communicator). Its number is taken, so the job cannot form: refused.
      if (const std::string job = field(*claim, "job"); other_jobs(job, env_.job)) {
        refuse(who(rank, *claim) + " is of job '" + job + "', but rank 0 is of job '" + env_.job + "': two " +
               "jobs meet on " + env_.init.to_string() + "; give each job a GPUXFER_INIT path of its own");
      }
      const std::string world = field(*claim, "world_size");
      if (world != std::to_string(env_.world_size)) {
        refuse("rank " + std::to_string(rank) + " (on " + field(*claim, "host") +
               ") says the world size is " + world + ", rank 0 says " + std::to_string(env_.world_size) +
               ": every rank must have the same GPUXFER_WORLD_SIZE (WORLD_SIZE, SLURM_NTASKS, "
               "OMPI_COMM_WORLD_SIZE)");
      }
      if (const std::string gpu = field(*claim, "gpu"); !gpu.empty()) {
        const auto [it, added] = gpus.emplace(gpu, who(rank, *claim));
        if (!added) refuse(two_ranks_on_one_gpu(who(rank, *claim), it->second, gpu));
      }
    }
    if (!missing.empty()) {
      refuse("rank 0 waited " + deadline_.describe() + " on " + env_.init.to_string() + " for " +
             missing.describe() + " of " + std::to_string(env_.world_size) +
             ", which never joined: check that every rank started and sees this file system path");
    }
    publish(path_, result_head() + "blob " + std::to_string(blob.size()) + "\n" + blob, false);
    clean_up_after_readers();
  }

  std::string result_head() const {
    return std::string(header) + "\nworld_size " + std::to_string(env_.world_size) + "\njob " + env_.job +
           "\n";
  }

  // Publishes the error for the ranks that wait for the result, then throws it. The files stay: a rank
  // still polling reads the error from them.
  [[noreturn]] void refuse(const std::string& message) {
    publish(path_, result_head() + "error " + message + "\n", false);
    comm_fail(message);
  }

  // Every rank says it has read the result; only then may it go. Bounded: a rank that never does (it
  // died after its claim) fails rank 0, naming it, and leaves the files behind.
  void clean_up_after_readers() {
    const Deadline reading(env_.timeout);
    for (int rank = 1; rank < env_.world_size; ++rank) {
      while (!exists(rank_file("done", rank)) && !reading.expired())
        std::this_thread::sleep_for(poll_interval);
      if (!exists(rank_file("done", rank))) {
        const std::string claim = read_whole(rank_file("rank", rank)).value_or("");
        comm_fail("rank " + std::to_string(rank) + " (on " + field(claim, "host") +
                  ") claimed its number but never read " + path_ + " within " + reading.describe() +
                  ": it died or was stopped after joining (its own output says why); the files stay in " +
                  "place for a look, remove " + path_ + "* before the next job");
      }
    }
    unlink(path_.c_str());
    for (int rank = 0; rank < env_.world_size; ++rank) {
      unlink(rank_file("rank", rank).c_str());
      unlink(rank_file("done", rank).c_str());
    }
  }

  std::string wait_for_result() {
    // A second more than rank 0 waits for the claims: when rank 0 started about when this rank did, its
    // error (a rank missing, a conflict) arrives rather than a timeout of this rank's own.
    const Deadline waiting(env_.timeout, std::chrono::seconds(1));
    std::optional<std::string> text;
    while (!(text = read_whole(path_))) {
      if (waiting.expired()) {
        comm_fail("rank " + std::to_string(env_.rank) + " waited " + deadline_.describe() +
                  " for rank 0 to write " + path_ +
                  ": check that rank 0 runs and that every rank has the same GPUXFER_INIT path on a file "
                  "system they all see");
      }
      std::this_thread::sleep_for(poll_interval);
    }
    const std::string world = field(*text, "world_size");
    if (!text->starts_with(std::string(header) + "\n"))
      comm_fail(path_ + " is not a gpuxfer rendezvous file");
    if (const std::string error = field(*text, "error"); !error.empty())
      comm_fail("rank 0 refused the job: " + error);
    if (const std::string job = field(*text, "job"); other_jobs(job, env_.job)) {
      comm_fail("rank " + std::to_string(env_.rank) + " is of job '" + env_.job + "', but " + path_ +
                " is rank 0's of job '" + job +
                "': two jobs meet on one path; give each job a GPUXFER_INIT path of its own");
    }
    if (world != std::to_string(env_.world_size)) {
      comm_fail("rank " + std::to_string(env_.rank) + " has world size " + std::to_string(env_.world_size) +
                ", rank 0 says " + world + " in " + path_ +
                ": every rank must have the same GPUXFER_WORLD_SIZE");
    }
    const std::string size_text = field(*text, "blob");
    const std::string line = "blob " + size_text + "\n";
    const auto start = text->find(line);
    const std::size_t size = size_text.empty() ? 0 : std::stoul(size_text);
    if (size_text.empty() || start == std::string::npos || text->size() != start + line.size() + size)
      comm_fail(path_ + " is truncated");
    return text->substr(start + line.size());
  }

  const LaunchEnv& env_;
  std::string path_;
  Deadline deadline_;
};

}  // namespace

std::string file_rendezvous(const LaunchEnv& env, const std::string& blob) {
  return FileRendezvous(env).run(blob);
}

}  // namespace gpuxfer::detail
