// gpuxfer::mpi_bootstrap and mpi_communicator (libgpuxfer_mpi): rank 0's blob over the caller's
// communicator, and a Communicator whose NCCL unique id travels that way. Non-blocking
// collectives polled against one Deadline, so a rank that never calls in makes the others fail within
// GPUXFER_TIMEOUT instead of hanging in MPI_Bcast.
#include <gpuxfer/mpi_bootstrap.hpp>

#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include <gpuxfer/error.hpp>

#include "comm/deadline.hpp"
#include "comm/launch_env.hpp"
#include "node/environment.hpp"

namespace gpuxfer {
namespace {

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  throw Error(Errc::comm_error, std::string(call) + " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

void require_usable(MPI_Comm comm) {
  int initialized = 0;
  int finalized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
  check_mpi(MPI_Finalized(&finalized), "MPI_Finalized");
  if (initialized == 0 || finalized != 0) {
    throw Error(Errc::invalid_argument, std::string("mpi_bootstrap needs MPI ") +
                                            (finalized != 0 ? "not yet finalised" : "initialised: call MPI_Init first"));
  }
  if (comm == MPI_COMM_NULL) throw Error(Errc::invalid_argument, "mpi_bootstrap was given MPI_COMM_NULL");
  int inter = 0;
  check_mpi(MPI_Comm_test_inter(comm, &inter), "MPI_Comm_test_inter");
  if (inter != 0) throw Error(Errc::invalid_argument, "mpi_bootstrap needs an intracommunicator, not an intercommunicator");
}

// What this rank's environment says against the communicator; nullopt when it agrees.
std::optional<Error> disagreement(const EnvLookup& lookup, int rank, int world_size) {
  try {
    const std::string because = "it was set";
    if (lookup("GPUXFER_WORLD_SIZE")) {
      const int stated = detail::read_env_count(lookup, "GPUXFER_WORLD_SIZE", because, 1);
      if (stated != world_size) {
        return Error(Errc::comm_error, "GPUXFER_WORLD_SIZE=" + std::to_string(stated) + " but the MPI communicator has " +
                                           std::to_string(world_size) +
                                           " ranks: unset it (the MPI bootstrap takes the world size from the "
                                           "communicator) or pass a communicator of that size");
      }
    }
    if (lookup("GPUXFER_RANK")) {
      const int stated = detail::read_env_count(lookup, "GPUXFER_RANK", because, 0);
      if (stated != rank) {
        return Error(Errc::comm_error, "GPUXFER_RANK=" + std::to_string(stated) + " but this process is rank " +
                                           std::to_string(rank) + " of the MPI communicator: unset it (the MPI "
                                           "bootstrap takes the rank from the communicator)");
      }
    }
  } catch (const Error& error) {
    return error;
  }
  return std::nullopt;
}

// What a pending request writes into: heap-held, so that a timed-out request may keep it.
struct Exchange {
  std::uint64_t agreement[2] = {0, 0};  // the lowest refusing rank + 1 (0: none), rank 0's blob size
  std::uint64_t contribution[2] = {0, 0};
  std::string bytes;
};

// Waits for @p request until @p deadline; false when it is still pending then.
bool wait_until(MPI_Request& request, const detail::Deadline& deadline) {
  for (;;) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done != 0) return true;
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Waits for @p request, or leaks @p exchange (MPI may still write into it: a collective cannot be
// cancelled) and throws.
void wait_or_throw(MPI_Request& request, const detail::Deadline& deadline, std::unique_ptr<Exchange>& exchange,
                   const std::string& what, int rank, int world_size) {
  if (wait_until(request, deadline)) return;
  static_cast<void>(exchange.release());
  throw Error(Errc::comm_error, what + " did not complete within " + deadline.describe() + " on rank " +
                                    std::to_string(rank) + " of " + std::to_string(world_size) +
                                    ": a rank of the communicator has not called mpi_bootstrap; the communicator "
                                    "now has a collective pending, end the job (MPI_Abort)");
}

class CommGuard {
 public:
  CommGuard() = default;
  CommGuard(const CommGuard&) = delete;
  CommGuard& operator=(const CommGuard&) = delete;
  ~CommGuard() {
    if (comm_ != MPI_COMM_NULL) static_cast<void>(MPI_Comm_free(&comm_));
  }
  MPI_Comm* out() { return &comm_; }
  [[nodiscard]] MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

int node_rank(MPI_Comm comm, int rank) {
  CommGuard node;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, node.out()), "MPI_Comm_split_type");
  int local = 0;
  check_mpi(MPI_Comm_rank(node.get(), &local), "MPI_Comm_rank");
  return local;
}

}  // namespace

MpiBootstrap mpi_bootstrap(MPI_Comm comm, const std::string& blob) {
  require_usable(comm);
  MpiBootstrap result;
  check_mpi(MPI_Comm_rank(comm, &result.rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &result.world_size), "MPI_Comm_size");
  const int rank = result.rank;
  const int world = result.world_size;

  // A rank that refuses still joins the first round, so that the others fail at once, naming it.
  const EnvLookup lookup = detail::process_env_lookup();
  auto refusal = disagreement(lookup, rank, world);
  std::chrono::milliseconds timeout = detail::default_comm_timeout;
  try {
    timeout = detail::read_comm_timeout(lookup);
  } catch (const Error& error) {
    if (!refusal) refusal = error;
  }
  if (!refusal && rank == 0 && blob.size() > static_cast<std::size_t>(INT_MAX)) {
    refusal = Error(Errc::invalid_argument, "mpi_bootstrap's blob is " + std::to_string(blob.size()) +
                                                " bytes; MPI counts reach INT_MAX");
  }
  const detail::Deadline deadline(timeout);

  auto exchange = std::make_unique<Exchange>();
  exchange->contribution[0] = refusal ? static_cast<std::uint64_t>(world - rank) : 0;
  exchange->contribution[1] = rank == 0 ? blob.size() : 0;
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(exchange->contribution, exchange->agreement, 2, MPI_UINT64_T, MPI_MAX, comm, &request),
            "MPI_Iallreduce");
  wait_or_throw(request, deadline, exchange, "the MPI bootstrap's first round (every rank joins)", rank, world);
  if (refusal) throw *refusal;
  if (exchange->agreement[0] != 0) {
    const auto refused = static_cast<std::uint64_t>(world) - exchange->agreement[0];
    throw Error(Errc::comm_error, "rank " + std::to_string(refused) + " of the MPI communicator's " +
                                      std::to_string(world) +
                                      " refused the bootstrap (its own error says why: GPUXFER_RANK, "
                                      "GPUXFER_WORLD_SIZE or GPUXFER_TIMEOUT)");
  }

  exchange->bytes = rank == 0 ? blob : std::string(exchange->agreement[1], '\0');
  check_mpi(MPI_Ibcast(exchange->bytes.data(), static_cast<int>(exchange->bytes.size()), MPI_BYTE, 0, comm, &request),
            "MPI_Ibcast");
  wait_or_throw(request, deadline, exchange, "the MPI bootstrap's broadcast of rank 0's blob", rank, world);
  result.blob = std::move(exchange->bytes);
  // Every rank has joined by now, so this blocking collective cannot wait for an absent one.
  result.local_rank = node_rank(comm, rank);
  return result;
}

Communicator mpi_communicator(MPI_Comm comm, const CommunicatorOptions& options) {
  // A first, empty round: every rank's place (its local rank picks its device), bounded like the second.
  const MpiBootstrap place = mpi_bootstrap(comm, std::string());
  return Communicator::from_exchange(place.rank, place.world_size, place.local_rank,
                                     [comm](const std::string& id) { return mpi_bootstrap(comm, id).blob; }, options);
}

}  // namespace gpuxfer
