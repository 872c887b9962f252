// Who this process is in a job of several: rank, world size, local rank and the rendezvous address, read
// from the environment that the launcher set (gpuxfer launch, torchrun, Slurm, Open MPI).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include <gpuxfer/options.hpp>

#include "bootstrap/init_address.hpp"

namespace gpuxfer::detail {

/// What GPUXFER_TIMEOUT is when unset.
inline constexpr std::chrono::seconds default_comm_timeout{300};
/// The largest world a launcher's variables may state: past any job's, so that a typo is refused before a
/// rank sizes per-rank tables by it.
inline constexpr int max_world_size = 1 << 20;

struct LaunchEnv {
  int rank = 0;        ///< 0 to world_size - 1
  int world_size = 1;  ///< the number of processes in the job
  int local_rank = 0;  ///< this process's index among those of its node: picks the GPU
  InitAddress init;    ///< where the ranks meet; Kind::none for a single process
  std::chrono::milliseconds timeout = default_comm_timeout;  ///< bounds every wait (GPUXFER_TIMEOUT)
  std::string launcher = "none";  ///< whose variables were read: gpuxfer, torchrun, slurm, openmpi or none
  /// The GPU this rank drives, as CUDA names it across processes ("GPU-<uuid>"); empty when none is known.
  /// The rendezvous refuses two ranks with one (NCCL cannot put two ranks on one GPU).
  std::string gpu;
  /// What names this job on every rank, when something does (read_launch_env says what); empty when
  /// nothing does. Both rendezvous refuse a process whose job has another name.
  std::string job;
  /// The job's secret, as bytes (GPUXFER_SECRET, GPUXFER_SECRET_FILE): every rank proves it holds it to
  /// the others before the TCP rendezvous says anything. Empty when none is set. Never logged.
  std::string secret;
  /// Rank 0: the socket gpuxfer launch listens on at init's port and hands it (GPUXFER_LISTEN_FD), so that
  /// no other process can take the port first; -1 when none.
  int listen_fd = -1;
};

/// The longest job name: GPUXFER_JOB_ID past it is refused, a launcher's own is cut there.
inline constexpr std::size_t max_job_bytes = 255;

/// Whether @p job and @p own name two jobs: both named, and not alike (a rank that names no job goes with
/// any). What both rendezvous refuse.
[[nodiscard]] inline bool other_jobs(const std::string& job, const std::string& own) {
  return !job.empty() && !own.empty() && job != own;
}

/// @p variable as an integer of at least @p least; @p because says why it is needed when it is unset.
/// @throws Error(Errc::invalid_option) naming the variable and its value, or saying it is unset
[[nodiscard]] int read_env_count(const EnvLookup& lookup, const std::string& variable,
                                 const std::string& because, int least);

/// GPUXFER_TIMEOUT (seconds, fractions allowed, 0.001 to 1e6), else default_comm_timeout.
/// @throws Error(Errc::invalid_option) naming the value
[[nodiscard]] std::chrono::milliseconds read_comm_timeout(const EnvLookup& lookup);

/// Reads, in this precedence: GPUXFER_RANK / GPUXFER_WORLD_SIZE / GPUXFER_LOCAL_RANK / GPUXFER_INIT;
/// torchrun's RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT; Open MPI's OMPI_COMM_WORLD_RANK /
/// _SIZE / _LOCAL_RANK; Slurm's SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID. Slurm and Open MPI give no
/// address: it comes from GPUXFER_INIT or MASTER_ADDR and MASTER_PORT. GPUXFER_INIT wins over
/// MASTER_ADDR/MASTER_PORT. From those, rank 0 listens on MASTER_ADDR at MASTER_PORT + 1: MASTER_PORT is
/// torch.distributed's (torchrun's agent serves its store there, or the program's init_process_group
/// does). With none of them set: a single process (rank 0 of 1, no address).
/// GPUXFER_TIMEOUT (seconds, fractions allowed) applies to all. The job's name: GPUXFER_JOB_ID (which
/// `gpuxfer launch` sets), else the launcher's own: "torchrun:" TORCHELASTIC_RUN_ID, "openmpi:"
/// OMPI_MCA_ess_base_jobid (Open MPI 4) or PMIX_NAMESPACE (5), "slurm:" SLURM_JOB_ID[.SLURM_STEP_ID];
/// else empty. The job's secret: GPUXFER_SECRET or GPUXFER_SECRET_FILE (bootstrap/secret.hpp), for a world of
/// several. Over TCP, rank 0 listens on the rendezvous host's address alone, or on GPUXFER_LISTEN_ADDR (a
/// numeric address; 0.0.0.0 or :: for every interface); rank 0 of several takes GPUXFER_LISTEN_FD, the
/// socket gpuxfer launch listens on for it.
/// @throws Error(Errc::invalid_option) naming the variable and its value
[[nodiscard]] LaunchEnv read_launch_env(const EnvLookup& lookup);

/// read_launch_env over the process environment.
[[nodiscard]] LaunchEnv launch_env_from_process();

}  // namespace gpuxfer::detail
