// gpuxfer::mpi_bootstrap and mpi_communicator (libgpuxfer_mpi): rank 0's blob over the caller's
// communicator, and a Communicator whose NCCL unique id travels that way. Non-blocking
// collectives polled against one Deadline, so a rank that never calls in makes the others fail within
// GPUXFER_TIMEOUT instead of hanging in MPI_Bcast.
#include <gpuxfer/mpi_bootstrap.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <gpuxfer/error.hpp>

#include "bootstrap/deadline.hpp"
#include "bootstrap/launch_env.hpp"
#include "hostops/host_gather_plan.hpp"
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

// One rank's part of the first round, the same size on every rank (MPI_Iallgather of raw bytes).
struct Place {
  std::uint64_t refused = 0;                             ///< 1 when this rank refuses the bootstrap
  std::uint64_t blob_size = 0;                           ///< rank 0's: the size of its blob
  char node[sizeof(detail::NodeRecord::identity)] = {};  ///< the host, as the Communicator counts nodes
};

// What pending requests write into: heap-held, so that a timed-out request may keep it.
struct Exchange {
  Place mine;
  std::vector<Place> places;
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

// This rank's index among the ranks of its node, in rank order.
int local_rank(const std::vector<Place>& places, int rank) {
  const auto& mine = places[static_cast<std::size_t>(rank)].node;
  return static_cast<int>(std::count_if(places.begin(), places.begin() + rank, [&](const Place& other) {
    return std::memcmp(other.node, mine, sizeof(mine)) == 0;
  }));
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

  // Two non-blocking rounds and nothing after them, so that a rank that gives up in either cannot leave
  // another waiting for it unbounded: every rank's place (refusal, node, rank 0's blob size), then rank 0's
  // blob.
  auto exchange = std::make_unique<Exchange>();
  exchange->mine.refused = refusal ? 1 : 0;
  exchange->mine.blob_size = rank == 0 ? blob.size() : 0;
  const detail::NodeRecord node = detail::local_node_record(0, std::nullopt);
  std::memcpy(exchange->mine.node, node.identity, sizeof(node.identity));
  exchange->places.resize(static_cast<std::size_t>(world));
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgather(&exchange->mine, sizeof(Place), MPI_BYTE, exchange->places.data(), sizeof(Place),
                           MPI_BYTE, comm, &request),
            "MPI_Iallgather");
  wait_or_throw(request, deadline, exchange, "the MPI bootstrap's first round (every rank joins)", rank, world);
  if (refusal) throw *refusal;
  const auto refused = std::find_if(exchange->places.begin(), exchange->places.end(),
                                    [](const Place& place) { return place.refused != 0; });
  if (refused != exchange->places.end()) {
    throw Error(Errc::comm_error, "rank " + std::to_string(refused - exchange->places.begin()) +
                                      " of the MPI communicator's " + std::to_string(world) +
                                      " refused the bootstrap (its own error says why: GPUXFER_RANK, "
                                      "GPUXFER_WORLD_SIZE or GPUXFER_TIMEOUT)");
  }
  result.local_rank = local_rank(exchange->places, rank);

  exchange->bytes = rank == 0 ? blob : std::string(exchange->places[0].blob_size, '\0');
  check_mpi(MPI_Ibcast(exchange->bytes.data(), static_cast<int>(exchange->bytes.size()), MPI_BYTE, 0, comm, &request),
            "MPI_Ibcast");
  wait_or_throw(request, deadline, exchange, "the MPI bootstrap's broadcast of rank 0's blob", rank, world);
  result.blob = std::move(exchange->bytes);
  return result;
}

Communicator mpi_communicator(MPI_Comm comm, const CommunicatorOptions& options) {
  // A first, empty round: every rank's place (its local rank picks its device), bounded like the second.
  const MpiBootstrap place = mpi_bootstrap(comm, std::string());
  return Communicator::from_exchange(place.rank, place.world_size, place.local_rank,
                                     [comm](const std::string& id) { return mpi_bootstrap(comm, id).blob; }, options);
}

}  // namespace gpuxfer
