// The program that tests/multiprocess/run_mpi_probe.cmake starts under mpirun, one mode per argument:
//   exchange     rank 0 offers a binary blob that depends on its pid (zero bytes included); rank 0 prints
//                "rank 0 sent <digest>" and every rank "rank R of N local L got <digest>"
//   refuse       every rank expects Errc::comm_error and prints "rank R: comm_error: <message>"
//   absent R     rank R never calls in (it waits 3 s and leaves); the others expect Errc::comm_error
//   stall R      on rank R, MPI_Test never reports the bootstrap's MPI_Ibcast done (this program interposes
//                MPI_Ibcast and MPI_Test, PMPI), so rank R gives up in the last round after the others have
//                passed it; every rank prints "rank R: stall: ok <digest>" or "rank R: stall: <errc>:
//                <message>", then stays 7 s, so that a rank that hangs is seen not to report
//   communicator every rank calls mpi_communicator and prints "rank R: communicator: joined on device D" or
//                "rank R: communicator: <errc>: <message>"; no_device and comm_error count as expected (a
//                machine with fewer GPUs than ranks), any other error does not
// Exits 0 when the mode's expectation held on this rank.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <unistd.h>

#include <gpuxfer/error.hpp>
#include <gpuxfer/mpi_bootstrap.hpp>

namespace {

// stall mode: the request of this rank's MPI_Ibcast that MPI_Test reports as pending for ever.
bool stall_broadcasts = false;
MPI_Request stalled = MPI_REQUEST_NULL;

}  // namespace

// The profiling interface: these definitions take the place of the MPI library's for libgpuxfer_mpi too.
extern "C" int MPI_Ibcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm,
                          MPI_Request* request) {
  const int rc = PMPI_Ibcast(buffer, count, type, root, comm, request);
  if (stall_broadcasts && rc == MPI_SUCCESS) stalled = *request;
  return rc;
}

extern "C" int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (stall_broadcasts && *request == stalled && stalled != MPI_REQUEST_NULL) {
    *flag = 0;
    return MPI_SUCCESS;
  }
  return PMPI_Test(request, flag, status);
}

namespace {

std::string pattern_blob() {
  std::string blob(200, '\0');
  const auto seed = static_cast<std::uint32_t>(getpid());
  for (std::size_t i = 0; i < blob.size(); ++i) {
    blob[i] = static_cast<char>(i % 50 == 0 ? 0 : (seed * 2654435761U + i * 40503U) >> 13);
  }
  return blob;
}

// Size, FNV-1a and the first bytes in hex: equal digests mean equal blobs for this test's purpose.
std::string digest(const std::string& blob) {
  std::uint64_t hash = 1469598103934665603ULL;
  for (const char c : blob) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  char text[96];
  std::snprintf(text, sizeof text, "%zu bytes fnv1a %016llx head %02x%02x%02x%02x", blob.size(),
                static_cast<unsigned long long>(hash), blob.size() > 0 ? static_cast<unsigned char>(blob[0]) : 0U,
                blob.size() > 1 ? static_cast<unsigned char>(blob[1]) : 0U,
                blob.size() > 2 ? static_cast<unsigned char>(blob[2]) : 0U,
                blob.size() > 3 ? static_cast<unsigned char>(blob[3]) : 0U);
  return text;
}

int expect_comm_error(int rank, const std::string& blob) {
  try {
    const auto boot = gpuxfer::mpi_bootstrap(MPI_COMM_WORLD, blob);
    std::printf("rank %d: no error, got %s\n", rank, digest(boot.blob).c_str());
    return 1;
  } catch (const gpuxfer::Error& e) {
    std::printf("rank %d: %s: %s\n", rank, std::string(gpuxfer::to_string(e.code())).c_str(), e.message().c_str());
    return e.code() == gpuxfer::Errc::comm_error ? 0 : 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 2;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string mode = argc > 1 ? argv[1] : "";
  const std::string blob = rank == 0 ? pattern_blob() : std::string("not rank 0's");
  int rc = 2;
  if (mode == "exchange") {
    try {
      const auto boot = gpuxfer::mpi_bootstrap(MPI_COMM_WORLD, blob);
      if (rank == 0) std::printf("rank 0 sent %s\n", digest(blob).c_str());
      std::printf("rank %d of %d local %d got %s\n", boot.rank, boot.world_size, boot.local_rank,
                  digest(boot.blob).c_str());
      rc = boot.rank == rank ? 0 : 1;
    } catch (const gpuxfer::Error& e) {
      std::printf("rank %d: %s\n", rank, e.what());
      rc = 1;
    }
  } else if (mode == "refuse") {
    rc = expect_comm_error(rank, blob);
  } else if (mode == "communicator") {
    try {
      const gpuxfer::Communicator comm = gpuxfer::mpi_communicator(MPI_COMM_WORLD);
      std::printf("rank %d: communicator: joined on device %d, rank %d of %d\n", rank, comm.device(), comm.rank(),
                  comm.world_size());
      rc = comm.rank() == rank ? 0 : 1;
    } catch (const gpuxfer::Error& e) {
      std::printf("rank %d: communicator: %s: %s\n", rank, std::string(gpuxfer::to_string(e.code())).c_str(),
                  e.message().c_str());
      rc = e.code() == gpuxfer::Errc::no_device || e.code() == gpuxfer::Errc::comm_error ? 0 : 1;
      // Stay until the ranks that wait for this one have timed out (GPUXFER_TIMEOUT=5): mpirun ends the
      // job when a rank leaves, before they could say so.
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::seconds(6));
    }
    // A rank that failed may leave the others in a pending broadcast, which MPI_Finalize could wait for.
    std::fflush(stdout);
    _exit(rc);
  } else if (mode == "absent" && argc > 2) {
    if (rank == std::atoi(argv[2])) {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      std::printf("rank %d: stayed away\n", rank);
      rc = 0;
    } else {
      rc = expect_comm_error(rank, blob);
    }
    // The others have a collective pending, which MPI_Finalize could wait for forever.
    std::fflush(stdout);
    _exit(rc);
  } else if (mode == "stall" && argc > 2) {
    stall_broadcasts = rank == std::atoi(argv[2]);
    try {
      const auto boot = gpuxfer::mpi_bootstrap(MPI_COMM_WORLD, blob);
      std::printf("rank %d: stall: ok %s\n", rank, digest(boot.blob).c_str());
      rc = 0;
    } catch (const gpuxfer::Error& e) {
      std::printf("rank %d: stall: %s: %s\n", rank, std::string(gpuxfer::to_string(e.code())).c_str(),
                  e.message().c_str());
      rc = e.code() == gpuxfer::Errc::comm_error ? 0 : 1;
    }
    // Stay until every rank that did not hang has said how it ended: mpirun ends the job when a rank
    // leaves. Then leave without MPI_Finalize, which could wait for a
    // collective that a rank that gave up left pending.
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(7));
    _exit(rc);
  } else {
    std::fprintf(stderr, "mpi_probe: unknown mode '%s'\n", mode.c_str());
  }
  std::fflush(stdout);
  MPI_Finalize();
  return rc;
}
