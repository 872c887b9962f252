// The TCP rendezvous: rank 0 listens and serves, every other rank connects, says who it is (a Hello), and
// gets rank 0's blob back, or the error that rank 0 found, which it throws. One thread, poll() throughout.
#pragma once

#include <chrono>
#include <string>

#include "bootstrap/init_address.hpp"
#include "bootstrap/launch_env.hpp"
#include "bootstrap/wire.hpp"

namespace gpuxfer::detail {

/// Rank 0: listens on @p env.init's port at its host's address alone (or at its listen_host: 0.0.0.0 or ::
/// for every interface), or serves on the socket @p env.listen_fd that gpuxfer launch listens on for it
/// (the first rendezvous of the process only); waits until every other rank has said hello, then sends
/// each @p blob. A host name that resolves to a loopback address here is warned of (other hosts' ranks
/// cannot reach it).
/// With @p env.secret, a connection must prove it (an HMAC of rank 0's challenge) before rank 0 reads its
/// Hello, and rank 0 proves it back; one that does not is dropped, told nothing, and cannot fail the job.
/// Rank 0 listens with a backlog of 1024 (or the world size, if larger), holds at most 128 connections
/// that have not said hello, each for at most 10 s (less with a shorter timeout), and when out of
/// descriptors drops the oldest of them rather than spin on accept.
/// Any inconsistency (world sizes that disagree, a rank claimed twice, a rank out of range, another
/// protocol version) or ranks missing at the deadline: every rank connected so far gets the error text,
/// then this throws it.
/// @throws Error(Errc::comm_error) naming the ranks, the hosts and what to set; naming GPUXFER_LISTEN_FD
///         when env.listen_fd is not a socket listening at the rendezvous's port
void serve_tcp_rendezvous(const LaunchEnv& env, const std::string& blob);

/// A rank other than 0: returns rank 0's blob. With @p env.secret, only from a rank 0 that proved it.
/// @throws Error(Errc::comm_error) when rank 0 cannot be reached by the deadline, answers with an error,
///         or closes the connection without an answer
[[nodiscard]] std::string join_tcp_rendezvous(const LaunchEnv& env);

/// join_tcp_rendezvous with a Hello the caller built (the tests send wrong ones); with @p secret (bytes),
/// rank 0 and this process prove it to each other first.
[[nodiscard]] std::string join_tcp_rendezvous(const InitAddress& address, const Hello& hello,
                                              std::chrono::milliseconds timeout,
                                              const std::string& secret = {});

}  // namespace gpuxfer::detail
