// The shared-file rendezvous (GPUXFER_INIT=file:///path): every rank claims its number with a file of its
// own (<path>.rank<r>, created atomically and exclusively); rank 0 waits for all the claims, then writes
// <path> atomically (temp file + link) with the world size and the blob, or with an error; the others
// poll for it. Each rank then leaves <path>.done<r>, and rank 0 removes every file once all have read it.
// Claims and result name their job (LaunchEnv::job): a claim or a result of another job is refused.
// Every file is created exclusively under a random temp name, mode 0600, published with an exclusive
// link() (never replacing a file, nor following a link, at its name), and read only as a regular file
// of this user of at most 16 KiB, without following a link or waiting on a FIFO; with the job's secret
// (LaunchEnv::secret) each carries an HMAC of its path and contents, and one without is refused.
#pragma once

#include <string>

#include "bootstrap/launch_env.hpp"

namespace gpuxfer::detail {

/// Returns rank 0's blob on every rank (@p blob is read on rank 0 only).
/// @throws Error(Errc::comm_error) for a rank claimed twice or a file left by an earlier job, a claim or a
///         result of another job, world sizes that disagree, ranks missing at the deadline (naming them),
///         a path that cannot be written, or a file that is not a rank's (not regular, another user's, too
///         large, malformed, or without the secret's MAC)
[[nodiscard]] std::string file_rendezvous(const LaunchEnv& env, const std::string& blob);

}  // namespace gpuxfer::detail
