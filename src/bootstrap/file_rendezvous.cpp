#include "bootstrap/file_rendezvous.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gpuxfer/error.hpp>

#include "bootstrap/deadline.hpp"
#include "bootstrap/rendezvous.hpp"
#include "bootstrap/secret.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/wire.hpp"
#include "runtime/log.hpp"

namespace gpuxfer::detail {
namespace {

constexpr std::chrono::milliseconds poll_interval{20};
constexpr const char* header = "gpuxfer-rendezvous 1";

[[noreturn]] void comm_fail(const std::string& message) { throw Error(Errc::comm_error, message); }

// The largest file of a rendezvous: a claim, or a result with an NCCL unique id (128 bytes) or an error.
constexpr std::size_t max_file_bytes = 16384;
// The line that ends a file written with the job's secret: "mac <HMAC-SHA256 of the path and the rest>".
constexpr std::size_t mac_line_bytes = 4 + 64 + 1;

// The files of a job, as messages name them (never a glob: for file:///tmp, "/tmp*" is every file there).
std::string files_of(const std::string& path) {
  return path + ", " + path + ".rank<N> and " + path + ".done<N>";
}

bool exists(const std::string& path) {
  struct stat info {};
  return lstat(path.c_str(), &info) == 0;
}

std::string mac_line(const std::string& path, const std::string& body, const std::string& secret) {
  return "mac " + to_hex(hmac_sha256(secret, path + "\n" + body)) + "\n";
}

// @p path's contents, or nullopt while it does not exist. Opened without following a link or waiting on a
// FIFO, and taken only as a regular file of this user, of at most max_file_bytes; with @p secret, only
// with its MAC line, which is removed.
std::optional<std::string> read_file(const std::string& path, const std::string& secret) {
  const UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    comm_fail("cannot open " + path + " (" + std::strerror(errno) +
              (errno == ELOOP ? ": a symbolic link, which the rendezvous does not follow" : "") + ")");
  }
  struct stat info {};
  if (fstat(fd.get(), &info) != 0) comm_fail("cannot stat " + path + " (" + std::strerror(errno) + ")");
  if (!S_ISREG(info.st_mode)) {
    comm_fail(path +
              " is not a regular file: not gpuxfer's (another process put it there); give the job "
              "a GPUXFER_INIT path in a folder of its own");
  }
  if (info.st_uid != geteuid()) {
    comm_fail(path + " belongs to another user (uid " + std::to_string(info.st_uid) +
              "): the rendezvous takes only its own user's files; give the job a GPUXFER_INIT path in a "
              "folder of its own");
  }
  if (static_cast<std::size_t>(info.st_size) > max_file_bytes) {
    comm_fail(path + " has " + std::to_string(info.st_size) + " bytes, more than a rendezvous file's " +
              std::to_string(max_file_bytes) + ": not gpuxfer's");
  }
  std::string text(max_file_bytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) comm_fail("cannot read " + path + " (" + std::strerror(errno) + ")");
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_file_bytes)
    comm_fail(path + " grew past " + std::to_string(max_file_bytes) + " bytes: not gpuxfer's");
  text.resize(got);
  if (secret.empty()) return text;
  const std::size_t body = text.size() < mac_line_bytes ? 0 : text.size() - mac_line_bytes;
  if (text.size() < mac_line_bytes ||
      !same_mac(text.substr(body), mac_line(path, text.substr(0, body), secret))) {
    comm_fail(path +
              " was not written with the job's secret (GPUXFER_SECRET or GPUXFER_SECRET_FILE): "
              "another process wrote it, or a rank of the job has another secret");
  }
  text.resize(body);
  return text;
}

// Writes @p text (and its MAC line, with @p secret) to a new temp file of a random name beside @p path,
// this user's alone, and publishes it whole, exclusively: linked to @p path, which link() never replaces
// nor follows. False when @p path exists already (whoever made it, a link too).
bool publish(const std::string& path, const std::string& text, const std::string& secret) {
  const std::string temp = path + ".tmp" + to_hex(random_bytes(8));
  const std::string sealed = secret.empty() ? text : text + mac_line(path, text, secret);
  {
    const UniqueFd fd(
        open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
    if (!fd)
      comm_fail("cannot write " + temp + " (" + std::strerror(errno) +
                "): GPUXFER_INIT's folder must be writable");
    std::size_t done = 0;
    while (done < sealed.size()) {
      const ssize_t n = write(fd.get(), sealed.data() + done, sealed.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int error = errno;
        unlink(temp.c_str());
        comm_fail("cannot write " + temp + " (" + std::strerror(error) + ")");
      }
      done += static_cast<std::size_t>(n);
    }
  }
  const bool done = link(temp.c_str(), path.c_str()) == 0;
  const int error = errno;
  unlink(temp.c_str());
  if (!done && error != EEXIST) comm_fail("cannot create " + path + " (" + std::strerror(error) + ")");
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
      comm_fail(path_ + " exists already, left by an earlier job: remove the files " + files_of(path_) +
                ", or use a new path in GPUXFER_INIT");
    }
    claim();
    if (env_.rank == 0) {
      serve(blob);
      return blob;
    }
    std::string result = wait_for_result();
    if (!publish(rank_file("done", env_.rank), "done\n", env_.secret)) {
      comm_fail("rank " + std::to_string(env_.rank) + " read rank 0's result, but " +
                rank_file("done", env_.rank) +
                " exists already, made by another process: rank 0 will not "
                "take it; give the job a GPUXFER_INIT path in a folder of its own");
    }
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
    if (!publish(rank_file("rank", env_.rank), claim_text(), env_.secret)) {
      comm_fail(
          "rank " + std::to_string(env_.rank) + " is claimed twice (" + rank_file("rank", env_.rank) +
          " exists: another process has this rank, or an earlier job left it): every process needs its own "
          "GPUXFER_RANK, and a new job needs a new GPUXFER_INIT path or the files " +
          files_of(path_) + " removed");
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
      try {
        while (!(claim = read_file(rank_file("rank", rank), env_.secret)) && !deadline_.expired()) {
          std::this_thread::sleep_for(poll_interval);
        }
      } catch (const Error& e) {
        refuse(e.what());  // the ranks that wait learn why, rather than time out
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
    if (blob.size() > max_file_bytes / 2) {
      refuse("rank 0's blob has " + std::to_string(blob.size()) +
             " bytes, more than the file rendezvous takes (" + std::to_string(max_file_bytes / 2) +
             "): use the TCP rendezvous");
    }
    if (!publish(path_, result_head() + "blob " + std::to_string(blob.size()) + "\n" + blob, env_.secret)) {
      comm_fail(path_ +
                " appeared while rank 0 waited for the claims, made by another process: rank 0 "
                "publishes its result only where nothing is, so the ranks cannot be told; give the job a "
                "GPUXFER_INIT path in a folder of its own");
    }
    clean_up_after_readers();
  }

  std::string result_head() const {
    return std::string(header) + "\nworld_size " + std::to_string(env_.world_size) + "\njob " + env_.job +
           "\n";
  }

  // Publishes the error for the ranks that wait for the result, then throws it. The files stay: a rank
  // still polling reads the error from them. Where another process made the result's file first, the
  // ranks cannot be told (they refuse that file, or time out).
  [[noreturn]] void refuse(const std::string& message) {
    if (!publish(path_, result_head() + "error " + message + "\n", env_.secret)) {
      comm_fail(message + " (and " + path_ + " was made by another process: the ranks cannot be told)");
    }
    comm_fail(message);
  }

  // Every rank says it has read the result; only then may it go. Bounded: a rank that never does (it
  // died after its claim) fails rank 0, naming it, and leaves the files behind.
  void clean_up_after_readers() {
    const Deadline reading(env_.timeout);
    for (int rank = 1; rank < env_.world_size; ++rank) {
      while (!read_file(rank_file("done", rank), env_.secret) && !reading.expired())
        std::this_thread::sleep_for(poll_interval);
      if (!read_file(rank_file("done", rank), env_.secret)) {
        const std::string claim = read_file(rank_file("rank", rank), env_.secret).value_or("");
        comm_fail("rank " + std::to_string(rank) + " (on " + field(claim, "host") +
                  ") claimed its number but never read " + path_ + " within " + reading.describe() +
                  ": it died or was stopped after joining (its own output says why); the files stay in " +
                  "place for a look: remove " + files_of(path_) + " before the next job");
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
    while (!(text = read_file(path_, env_.secret))) {
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
    std::size_t size = 0;
    const char* end = size_text.data() + size_text.size();
    const auto [parsed, status] = std::from_chars(size_text.data(), end, size);
    if (size_text.empty() || status != std::errc{} || parsed != end || start == std::string::npos ||
        text->size() - (start + line.size()) != size) {
      comm_fail(path_ + " is malformed (truncated, or not written by gpuxfer's rank 0)");
    }
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
