/// @file mpi_bootstrap.hpp
/// @brief The bootstrap of a job of several processes over the caller's MPI communicator: every rank
///        gets rank 0's bytes (NCCL's unique id, for mpi_communicator) through MPI instead of a TCP or
///        file rendezvous.
///
/// Part of gpuxfer::mpi (libgpuxfer_mpi), which exists only when gpuxfer is built with MPI
/// (GPUXFER_WITH_MPI); libgpuxfer itself never includes mpi.h nor links MPI. A CMake consumer asks for it
/// with `find_package(gpuxfer CONFIG REQUIRED COMPONENTS mpi)` and links `gpuxfer::mpi`, built against the
/// MPI that gpuxfer was built with.
#pragma once

#include <string>

#include <mpi.h>

#include <gpuxfer/communicator.hpp>

namespace gpuxfer {

/// What mpi_bootstrap hands each rank: its place in the communicator, and rank 0's bytes.
struct MpiBootstrap {
  int rank = 0;        ///< MPI_Comm_rank of the communicator
  int world_size = 1;  ///< MPI_Comm_size of the communicator
  int local_rank = 0;  ///< this rank's index among the communicator's ranks on its node: picks the GPU
  std::string blob;    ///< rank 0's @p blob, byte for byte
};

/// Hands every rank of @p comm the @p blob that rank 0 passes (on the other ranks @p blob is not read),
/// with MPI_Ibcast on @p comm; rank and world size come from @p comm, the local rank from the ranks of
/// @p comm on this node (host name, kernel boot id and /dev/shm, as the Communicator counts nodes; sent
/// in the first round, an MPI_Iallgather). Collective: every rank of @p comm calls it, from the
/// thread that calls MPI. Returns only when every rank has joined, so it doubles as a barrier. Every
/// wait is bounded by GPUXFER_TIMEOUT (seconds, default 300); GPUXFER_RANK and GPUXFER_WORLD_SIZE, where
/// set, must agree with @p comm. MPI must be initialised and not finalised.
/// @throws Error(Errc::invalid_argument) for MPI_COMM_NULL, an intercommunicator, MPI not initialised (or
///         finalised), or a blob of more than INT_MAX bytes on rank 0
/// @throws Error(Errc::invalid_option) for a bad GPUXFER_TIMEOUT, GPUXFER_RANK or GPUXFER_WORLD_SIZE
/// @throws Error(Errc::comm_error) when GPUXFER_RANK or GPUXFER_WORLD_SIZE disagrees with @p comm (the
///         other ranks then get an error naming that rank), when an MPI call fails, or when a rank has not
///         joined within the timeout: MPI cannot cancel a collective, so @p comm then has one pending and
///         the job should end (MPI_Abort)
[[nodiscard]] MpiBootstrap mpi_bootstrap(MPI_Comm comm, const std::string& blob);

/// A Communicator of the ranks of @p comm, one GPU each: rank and world size from @p comm, the device from
/// the local rank (as mpi_bootstrap counts it) unless CommunicatorOptions::device says otherwise, NCCL's
/// unique id handed over by mpi_bootstrap (so GPUXFER_RANK and GPUXFER_WORLD_SIZE, where set, must agree, and
/// its waits are bounded by GPUXFER_TIMEOUT; NCCL's by the communicator's timeout). Collective over @p comm,
/// from the thread that calls MPI. A rank that cannot choose its device throws at once (Errc::no_device); the
/// others then fail within the timeout (Errc::comm_error), since MPI cannot cancel the broadcast they wait
/// in.
/// @throws as mpi_bootstrap and as Communicator::from_exchange
[[nodiscard]] Communicator mpi_communicator(MPI_Comm comm, const CommunicatorOptions& options = {});

}  // namespace gpuxfer
