// The shared-file rendezvous (GPUXFER_INIT=file:///path): every rank claims its number with a file of its
// own (<path>.rank<r>, created atomically and exclusively); rank 0 waits for all the claims, then writes
// <path> atomically (temp file + rename) with the world size and the blob, or with an error; the others
// poll for it. Each rank then leaves <path>.done<r>, and rank 0 removes every file once all have read it.
// Claims and result name their job (LaunchEnv::job): a claim or a result of another job is refused.
#pragma once

#include <string>

#include "comm/launch_env.hpp"

namespace gpuxfer::detail {

/// Returns rank 0's blob on every rank (@p blob is read on rank 0 only).
/// @throws Error(Errc::comm_error) for a rank claimed twice or a file left by an earlier job, a claim or a
///         result of another job, world sizes that disagree, ranks missing at the deadline (naming them), or
///         a path that cannot be written
[[nodiscard]] std::string file_rendezvous(const LaunchEnv& env, const std::string& blob);

}  // namespace gpuxfer::detail
