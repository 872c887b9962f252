#include "comm/tcp_rendezvous.hpp"

#include <cerrno>
#include <map>
#include <optional>
#include <vector>

#include <poll.h>
#include <sys/socket.h>

#include <gpuxfer/error.hpp>

#include "comm/deadline.hpp"
#include "comm/rendezvous.hpp"
#include "comm/socket.hpp"
#include "runtime/log.hpp"

namespace gpuxfer::detail {
namespace {

// The most a Hello can take: its fixed part and a host name, a GPU id and a job name of 255 bytes each.
constexpr std::size_t max_hello_bytes = 1024;
// How long rank 0 tries to deliver an error to a rank before it gives up on that rank.
constexpr std::chrono::milliseconds error_delivery{500};

struct Peer {
  UniqueFd socket;
  std::string received;
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
    listener_ = tcp_listen(env.init.host, env.init.port, env.world_size, env.init.every_interface, deadline_);
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
  static std::span<const std::byte> as_bytes(const std::string& text) {
    return std::as_bytes(std::span<const char>(text.data(), text.size()));
  }

  void poll_once() {
    std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
    for (const Peer& peer : pending_) fds.push_back({peer.socket.get(), POLLIN, 0});
    // A rank that joined sends nothing more: its socket turns readable only when the rank has gone.
    const std::size_t joined_at = fds.size();
    for (const auto& [rank, peer] : joined_) fds.push_back({peer.socket.get(), POLLIN, 0});
    if (poll(fds.data(), fds.size(), deadline_.poll_ms(std::chrono::milliseconds(100))) <= 0) return;
    std::size_t at = joined_at;
    for (const auto& [rank, peer] : joined_) {
      if (fds[at++].revents != 0) fail_left(peer);
    }
    if (fds[0].revents != 0) accept_all();
    // pending_ may have grown; only the entries that were polled have revents.
    std::vector<Peer> still_pending;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
      Peer& peer = pending_[i];
      if (i + 1 < fds.size() && fds[i + 1].revents != 0 && !read_hello(peer)) continue;  // gone
      if (peer.hello) {
        admit(peer);  // moves the peer into joined_ when it is a rank
      } else {
        still_pending.push_back(std::move(peer));
      }
    }
    pending_ = std::move(still_pending);
  }

  void accept_all() {
    while (true) {
      UniqueFd socket(accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!socket) return;
      pending_.push_back(Peer{std::move(socket), {}, std::nullopt});
    }
  }

  // False when the peer went away before its Hello was whole (not a rank, or a rank that died: the
  // missing-rank error reports it later if it never comes back).
  static bool read_hello(Peer& peer) {
    const ReadResult result = read_some(peer.socket, peer.received, max_hello_bytes);
    peer.hello = decode_hello(peer.received);
    return peer.hello.has_value() || result != ReadResult::closed;
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
    return "rank 0 waited " + deadline_.describe() + " on " + env_.init.to_string() + " for " +
           missing.describe() + " of " + std::to_string(env_.world_size) +
           ", which never joined: check that every rank started, that each can reach this address, and "
           "that GPUXFER_TIMEOUT allows for the slowest start";
  }

  // Tells every rank connected so far (and @p also, and the connections whose Hello is still incomplete)
  // what went wrong, then throws it.
  [[noreturn]] void fail(const std::string& message, Peer* also = nullptr) {
    const std::string reply = encode(Reply{false, message});
    const Deadline delivery(error_delivery);
    if (also != nullptr) (void)send_all(also->socket, as_bytes(reply), delivery);
    for (auto& [rank, peer] : joined_) (void)send_all(peer.socket, as_bytes(reply), delivery);
    for (Peer& peer : pending_) {
      if (&peer != also) (void)send_all(peer.socket, as_bytes(reply), delivery);
    }
    throw Error(Errc::comm_error, message);
  }

  const LaunchEnv& env_;
  Deadline deadline_;
  Hello self_;
  UniqueFd listener_;
  std::vector<Peer> pending_;
  std::map<std::uint32_t, Peer> joined_;
};

}  // namespace

void serve_tcp_rendezvous(const LaunchEnv& env, const std::string& blob) { Server(env).run(blob); }

std::string join_tcp_rendezvous(const LaunchEnv& env) {
  return join_tcp_rendezvous(env.init, hello_of(env), env.timeout);
}

std::string join_tcp_rendezvous(const InitAddress& address, const Hello& hello,
                                std::chrono::milliseconds timeout) {
  const std::string who = "rank " + std::to_string(hello.rank);
  const Deadline connecting(timeout);
  const UniqueFd socket = tcp_connect(address.host, address.port, connecting, who);
  const std::string message = encode(hello);
  // Rank 0 listened before this connection, so its own deadline ends within one timeout from now: waiting
  // a little longer lets its error (a rank missing, a conflict) arrive rather than a timeout of our own.
  const Deadline answering(timeout, std::chrono::seconds(1));
  if (!send_all(socket, std::as_bytes(std::span<const char>(message.data(), message.size())), answering)) {
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
                      who + " started twice?)");
    }
  }
}

}  // namespace gpuxfer::detail
