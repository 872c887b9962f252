#include "bootstrap/tcp_rendezvous.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include <poll.h>
#include <sys/socket.h>

#include <gpuxfer/error.hpp>

#include "bootstrap/deadline.hpp"
#include "bootstrap/rendezvous.hpp"
#include "bootstrap/secret.hpp"
#include "bootstrap/socket.hpp"
#include "runtime/log.hpp"

namespace gpuxfer::detail {
namespace {

// The most a Hello can take: its fixed part and a host name, a GPU id and a job name of 255 bytes each.
constexpr std::size_t max_hello_bytes = 1024;
// How long rank 0 tries to deliver an error to a rank before it gives up on that rank.
constexpr std::chrono::milliseconds error_delivery{500};
// Room for a burst of connections (200 at once took 9 s with a backlog of the world size); the kernel caps
// it at net.core.somaxconn.
constexpr int listen_backlog = 1024;
// The most connections rank 0 holds before they have proven the secret and said hello: past it, the
// oldest is dropped.
constexpr std::size_t max_pending = 128;
// How long a connection may take to prove the secret and say hello (a rank does at once).
constexpr std::chrono::milliseconds admit_within{10000};
// How long rank 0 leaves its listener alone when it has no descriptor to accept with and none to free.
constexpr std::chrono::milliseconds accept_pause{100};

// With a secret, before anything else: the rank sends auth_tag and its nonce; rank 0 answers with its
// nonce and the MAC of both under rank0_label; the rank answers with the MAC under rank_label. The labels
// differ, so that neither side's proof can be played back as the other's.
constexpr std::string_view auth_tag = "GXFA";
constexpr std::size_t nonce_bytes = 32;
constexpr std::size_t mac_bytes = 32;
constexpr std::string_view rank0_label = "gpuxfer rendezvous: rank 0 proves the secret";
constexpr std::string_view rank_label = "gpuxfer rendezvous: a rank proves the secret";

// @p text as the bytes send_all takes.
std::span<const std::byte> as_bytes(const std::string& text) {
  return std::as_bytes(std::span<const char>(text.data(), text.size()));
}

std::string proof(const std::string& secret, std::string_view label, const std::string& nonces) {
  return hmac_sha256(secret, std::string(label) + nonces);
}

// Whether a rendezvous of this process has taken GPUXFER_LISTEN_FD's socket.
std::atomic<bool> listen_fd_taken{false};

// Where a connection to rank 0 is: proving the secret (challenge: its nonce expected; proof: its MAC
// expected), then saying hello. Without a secret every connection starts at hello.
enum class Stage { challenge, proof, hello };

struct Peer {
  UniqueFd socket;
  Stage stage = Stage::hello;
  Deadline::Clock::time_point admit_by;
  std::string received;
  std::string nonces;  ///< the peer's and rank 0's, which the peer's proof signs
  std::optional<Hello> hello;
};

// What this process says of itself: the Hello it sends, or (rank 0) compares the others' with.
Hello hello_of(const LaunchEnv& env) {
  Hello hello;
  hello.world_size = static_cast<std::uint32_t>(env.world_size);
  hello.rank = static_cast<std::uint32_t>(env.rank);
  hello.local_rank = static_cast<std::uint32_t>(env.local_rank);
  hello.host = local_host_name();
  hello.gpu = env.gpu;
  hello.job = env.job;
  return hello;
}

// Rank 0's view of a rendezvous in progress.
class Server {
 public:
  explicit Server(const LaunchEnv& env) : env_(env), deadline_(env.timeout), self_(hello_of(env)) {
    const int backlog = std::max(listen_backlog, env.world_size);
    // The launcher's socket serves the first rendezvous alone: a later one in this process (another
    // communicator) must not take the number again, which may name another file by then.
    if (env.listen_fd >= 0 && !listen_fd_taken.exchange(true)) {
      listener_ = adopt_listener(env.listen_fd, env.init.port, backlog, "GPUXFER_LISTEN_FD");
    } else {
      listener_ = tcp_listen(env.init.listen_at(), env.init.port, backlog, deadline_);
    }
    if (env.init.listen_host.empty() && !is_numeric_address(env.init.host) && env.init.host != "localhost" &&
        bound_to_loopback(listener_)) {
      GPUXFER_LOG(warn, "rendezvous: rank 0 listens on a loopback address: '" + env.init.host +
                            "' resolves to one on this host (as Debian's /etc/hosts has it), which ranks on "
                            "other hosts cannot reach; give them an address of this host they reach "
                            "(GPUXFER_INIT, MASTER_ADDR), or set GPUXFER_LISTEN_ADDR=0.0.0.0 to listen on "
                            "every interface");
    }
  }

  void run(const std::string& blob) {
    while (joined_.size() + 1 < static_cast<std::size_t>(env_.world_size)) {
      if (deadline_.expired()) fail(missing_ranks());
      poll_once();
    }
    const Deadline delivery(env_.timeout);
    for (auto& [rank, peer] : joined_) {
      if (!send_all(peer.socket, as_bytes(encode(Reply{true, blob})), delivery)) {
        fail("rank " + std::to_string(rank) + " closed its connection before rank 0 could send it the blob");
      }
    }
  }

 private:
  void poll_once() {
    const auto now = Deadline::Clock::now();
    std::vector<pollfd> fds{{now < accept_after_ ? -1 : listener_.get(), POLLIN, 0}};
    for (const Peer& peer : pending_) fds.push_back({peer.socket.get(), POLLIN, 0});
    // A rank that joined sends nothing more: its socket turns readable only when the rank has gone.
    const std::size_t joined_at = fds.size();
    for (const auto& [rank, peer] : joined_) fds.push_back({peer.socket.get(), POLLIN, 0});
    if (poll(fds.data(), fds.size(), deadline_.poll_ms(std::chrono::milliseconds(100))) < 0) return;
    std::size_t at = joined_at;
    for (const auto& [rank, peer] : joined_) {
      if (fds[at++].revents != 0) fail_left(peer);
    }
    std::vector<Peer> still_pending;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
      Peer& peer = pending_[i];
      if (fds[i + 1].revents != 0 && !progress(peer)) continue;  // gone, or not a rank of this job
      if (peer.hello) {
        admit(peer);  // moves the peer into joined_ when it is a rank
      } else if (Deadline::Clock::now() < peer.admit_by) {
        still_pending.push_back(std::move(peer));
      } else {
        GPUXFER_LOG(debug, "rendezvous: dropped a connection that said nothing in time");
        if (peer.stage != Stage::hello) ++unproven_;
      }
    }
    pending_ = std::move(still_pending);
    // After the reads: a connection accepted now is read once poll has seen it.
    if (fds[0].revents != 0) accept_all();
  }

  void accept_all() {
    while (true) {
      UniqueFd socket(accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!socket) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) make_room();
        return;
      }
      if (pending_.size() >= max_pending) drop_oldest();
      const Stage first = env_.secret.empty() ? Stage::hello : Stage::challenge;
      pending_.push_back(Peer{std::move(socket),
                              first,
                              Deadline::Clock::now() + std::min(admit_within, env_.timeout),
                              {},
                              {},
                              std::nullopt});
    }
  }

  // Out of descriptors: the oldest connection that has not said hello goes (the connections that wait
  // in the backlog behind it, a rank among them perhaps, come in its place); with none, the listener
  // rests a moment rather than poll() waking at once for an accept that fails again.
  void make_room() {
    if (pending_.empty()) {
      accept_after_ = Deadline::Clock::now() + accept_pause;
    } else {
      drop_oldest();
    }
  }

  void drop_oldest() {
    GPUXFER_LOG(debug, "rendezvous: dropped the oldest connection that has not said hello, to make room");
    if (pending_.front().stage != Stage::hello) ++unproven_;
    pending_.erase(pending_.begin());
  }

  // Reads what @p peer sent and moves it on as far as that allows. False when it is to be dropped: it
  // went away before its Hello was whole (not a rank, or a rank that died: the missing-rank error reports
  // it later if it never comes back), sent more than a Hello can take, or did not prove the secret.
  bool progress(Peer& peer) {
    const std::size_t limit = 2 * nonce_bytes + mac_bytes + max_hello_bytes;
    const ReadResult result = read_some(peer.socket, peer.received, limit);
    if (peer.stage == Stage::challenge && !answer_challenge(peer)) return unproven();
    if (peer.stage == Stage::proof && !check_proof(peer)) return unproven();
    if (peer.stage != Stage::hello) return result != ReadResult::closed || unproven();
    if (env_.secret.empty() && peer.received.starts_with(auth_tag)) {
      GPUXFER_LOG(warn,
                  "rendezvous: dropped a rank that has a secret (GPUXFER_SECRET or GPUXFER_SECRET_FILE): "
                  "rank 0 has none; give every rank the same one");
      return false;
    }
    peer.hello = decode_hello(peer.received);
    if (!peer.hello && peer.received.size() >= limit) return false;
    return peer.hello.has_value() || result != ReadResult::closed;
  }

  bool unproven() {
    ++unproven_;
    return false;
  }

  // The peer's challenge, once whole, answered with rank 0's nonce and proof. False for a peer that does
  // not speak first as a rank with a secret does (a rank without one, or anything else).
  bool answer_challenge(Peer& peer) {
    const std::size_t tag = auth_tag.size();
    if (peer.received.compare(0, std::min(tag, peer.received.size()), auth_tag, 0,
                              std::min(tag, peer.received.size())) != 0) {
      return false;
    }
    if (peer.received.size() < tag + nonce_bytes) return true;
    const std::string ours = random_bytes(nonce_bytes);
    peer.nonces = peer.received.substr(tag, nonce_bytes) + ours;
    peer.received.erase(0, tag + nonce_bytes);
    peer.stage = Stage::proof;
    return send_all(peer.socket, as_bytes(ours + proof(env_.secret, rank0_label, peer.nonces)),
                    Deadline(error_delivery));
  }

  // The peer's proof, once whole: false when it is not the secret's.
  bool check_proof(Peer& peer) {
    if (peer.received.size() < mac_bytes) return true;
    const bool proven =
        same_mac(peer.received.substr(0, mac_bytes), proof(env_.secret, rank_label, peer.nonces));
    peer.received.erase(0, mac_bytes);
    if (proven) peer.stage = Stage::hello;
    return proven;
  }

  void admit(Peer& peer) {
    const Hello& hello = *peer.hello;
    if (hello.magic != wire_magic) {
      GPUXFER_LOG(warn, "rendezvous: a connection that is not a gpuxfer rank was dropped");
      return;
    }
    const std::string who = hello.describe();
    if (hello.version != wire_version) {
      fail(who + " speaks rendezvous protocol " + std::to_string(hello.version) + ", rank 0 speaks " +
               std::to_string(wire_version) + ": every rank must run the same gpuxfer",
           &peer);
    }
    // Before anything that fails the job: a process of another job (two jobs given one port, or a rank of
    // an earlier job still trying to reach its rank 0) is turned away alone.
    if (other_jobs(hello.job, self_.job)) {
      refuse(peer, who + " is of job '" + hello.job + "', but rank 0 at " + env_.init.to_string() + " (on " +
                       self_.host + ") serves job '" + self_.job +
                       "': two jobs meet on one address; give each job a rendezvous address of its own "
                       "(GPUXFER_INIT, or MASTER_PORT)");
      return;
    }
    if (hello.world_size != self_.world_size) {
      fail(who + " says the world size is " + std::to_string(hello.world_size) + ", rank 0 (on " +
               self_.host + ") says " + std::to_string(self_.world_size) +
               ": every rank must have the same GPUXFER_WORLD_SIZE (WORLD_SIZE, SLURM_NTASKS, "
               "OMPI_COMM_WORLD_SIZE)",
           &peer);
    }
    if (hello.rank == 0 || hello.rank >= self_.world_size) {
      fail(who + " is out of range: a world of " + std::to_string(self_.world_size) + " has ranks 1 to " +
               std::to_string(self_.world_size - 1) + " besides rank 0 (on " + self_.host +
               "): check GPUXFER_RANK (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK)",
           &peer);
    }
    if (const auto it = joined_.find(hello.rank); it != joined_.end()) {
      fail("rank " + std::to_string(hello.rank) + " is claimed twice: by " + it->second.hello->describe() +
               " and by " + who +
               ": every process needs its own GPUXFER_RANK (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK)",
           &peer);
    }
    if (!hello.gpu.empty()) {
      const auto drives_it = [&](const Hello& other) { return other.gpu == hello.gpu; };
      const Hello* other = drives_it(self_) ? &self_ : nullptr;
      for (const auto& [rank, joined] : joined_) {
        if (other == nullptr && drives_it(*joined.hello)) other = &*joined.hello;
      }
      if (other != nullptr) fail(two_ranks_on_one_gpu(who, other->describe(), hello.gpu), &peer);
    }
    GPUXFER_LOG(debug, "rendezvous: " + who + " joined");
    const std::uint32_t rank = hello.rank;
    joined_.emplace(rank, std::move(peer));
  }

  // Tells @p peer alone why it is turned away; the connection closes when the caller drops it.
  static void refuse(Peer& peer, const std::string& message) {
    GPUXFER_LOG(warn, "rendezvous: refused " + message);
    (void)send_all(peer.socket, as_bytes(encode(Reply{false, message})), Deadline(error_delivery));
  }

  // A joined rank's socket turned readable: it closed (the rank died or was stopped) or sent what no rank
  // sends. Either way the world cannot form with it.
  [[noreturn]] void fail_left(const Peer& peer) {
    fail(peer.hello->describe() +
         " left after joining (its connection to rank 0 closed before every rank had joined): it "
         "died or was stopped; its own output says why");
  }

  std::string missing_ranks() const {
    RankList missing;
    for (int rank = 1; rank < env_.world_size; ++rank) {
      if (joined_.count(static_cast<std::uint32_t>(rank)) == 0) missing.add(rank);
    }
    const std::string unproven =
        unproven_ == 0 ? ""
                       : " (" + std::to_string(unproven_) +
                             " connections that did not prove the job's secret were dropped: every rank "
                             "needs the same GPUXFER_SECRET or GPUXFER_SECRET_FILE)";
    return "rank 0 waited " + deadline_.describe() + " on " + env_.init.to_string() + " for " +
           missing.describe() + " of " + std::to_string(env_.world_size) + ", which never joined" + unproven +
           ": check that every rank started, that each can reach this address, and that GPUXFER_TIMEOUT "
           "allows for the slowest start";
  }

  // Tells every rank connected so far (and @p also, and the connections that proved the secret, or all
  // without one, whose Hello is still incomplete) what went wrong, then throws it.
  [[noreturn]] void fail(const std::string& message, Peer* also = nullptr) {
    const std::string reply = encode(Reply{false, message});
    const Deadline delivery(error_delivery);
    if (also != nullptr) (void)send_all(also->socket, as_bytes(reply), delivery);
    for (auto& [rank, peer] : joined_) (void)send_all(peer.socket, as_bytes(reply), delivery);
    for (Peer& peer : pending_) {
      if (&peer != also && peer.stage == Stage::hello) (void)send_all(peer.socket, as_bytes(reply), delivery);
    }
    throw Error(Errc::comm_error, message);
  }

  const LaunchEnv& env_;
  Deadline deadline_;
  Hello self_;
  UniqueFd listener_;
  std::vector<Peer> pending_;  ///< oldest first
  std::map<std::uint32_t, Peer> joined_;
  std::size_t unproven_ = 0;  ///< connections dropped for not proving the secret, for the timeout's message
  Deadline::Clock::time_point accept_after_{};
};

// With a secret: proves it to rank 0 and has rank 0 prove it back, before the Hello says anything.
void prove_each_other(const UniqueFd& socket, const std::string& secret, const std::string& who,
                      const InitAddress& address, const Deadline& deadline) {
  const std::string ours = random_bytes(nonce_bytes);
  const std::string challenge = std::string(auth_tag) + ours;
  const std::string lacks = ": every rank needs the same GPUXFER_SECRET (or GPUXFER_SECRET_FILE), rank 0 too";
  if (!send_all(socket, as_bytes(challenge), deadline)) {
    throw Error(Errc::comm_error,
                who + " could not send its challenge to rank 0 at " + address.to_string() + lacks);
  }
  std::string answer;
  while (answer.size() < nonce_bytes + mac_bytes) {
    if (!wait_readable(socket, deadline)) {
      throw Error(Errc::comm_error, who + " got no proof of the job's secret from " + address.to_string() +
                                        " within " + deadline.describe() + lacks);
    }
    if (read_some(socket, answer, nonce_bytes + mac_bytes) == ReadResult::closed &&
        answer.size() < nonce_bytes + mac_bytes) {
      throw Error(Errc::comm_error,
                  "rank 0 at " + address.to_string() + " closed the connection of " + who +
                      " before proving the job's secret (it refused this rank's, or has none)" + lacks);
    }
  }
  const std::string nonces = ours + answer.substr(0, nonce_bytes);
  if (!same_mac(answer.substr(nonce_bytes), proof(secret, rank0_label, nonces))) {
    throw Error(Errc::comm_error, "the process at " + address.to_string() +
                                      " did not prove the job's secret, so " + who +
                                      " took nothing from it: either it has another GPUXFER_SECRET, or "
                                      "it is not this job's rank 0 (another process holds the port)");
  }
  const std::string ours_proven = proof(secret, rank_label, nonces);
  if (!send_all(socket, as_bytes(ours_proven), deadline)) {
    throw Error(Errc::comm_error, who + ": rank 0 at " + address.to_string() +
                                      " closed the connection before this rank proved the job's secret");
  }
}

}  // namespace

void serve_tcp_rendezvous(const LaunchEnv& env, const std::string& blob) { Server(env).run(blob); }

std::string join_tcp_rendezvous(const LaunchEnv& env) {
  return join_tcp_rendezvous(env.init, hello_of(env), env.timeout, env.secret);
}

std::string join_tcp_rendezvous(const InitAddress& address, const Hello& hello,
                                std::chrono::milliseconds timeout, const std::string& secret) {
  const std::string who = "rank " + std::to_string(hello.rank);
  const Deadline connecting(timeout);
  const UniqueFd socket = tcp_connect(address.host, address.port, connecting, who);
  const std::string message = encode(hello);
  // Rank 0 listened before this connection, so its own deadline ends within one timeout from now: waiting
  // a little longer lets its error (a rank missing, a conflict) arrive rather than a timeout of our own.
  const Deadline answering(timeout, std::chrono::seconds(1));
  if (!secret.empty()) prove_each_other(socket, secret, who, address, answering);
  if (!send_all(socket, as_bytes(message), answering)) {
    throw Error(Errc::comm_error, who + " could not send its hello to rank 0 at " + address.to_string() +
                                      ": rank 0 closed the connection (it failed or was stopped)");
  }
  std::string received;
  while (true) {
    if (!wait_readable(socket, answering)) {
      throw Error(Errc::comm_error, who + " got no answer from rank 0 at " + address.to_string() +
                                        " within " + answering.describe() +
                                        ": rank 0 is stuck or waits for other ranks");
    }
    const ReadResult result = read_some(socket, received, max_reply_payload + 16);
    if (const auto reply = decode_reply(received)) {
      if (!reply->ok) throw Error(Errc::comm_error, "rank 0 refused " + who + ": " + reply->payload);
      return reply->payload;
    }
    if (result == ReadResult::closed) {
      throw Error(Errc::comm_error,
                  who + ": rank 0 at " + address.to_string() +
                      " closed the connection without an answer (it failed or was stopped, or its world "
                      "had formed without this process: is " +
                      who + " started twice? Or rank 0 has a GPUXFER_SECRET and this rank none)");
    }
  }
}

}  // namespace gpuxfer::detail
