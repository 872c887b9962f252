#include "bootstrap/launch_env.hpp"

#include <charconv>
#include <cmath>
#include <optional>
#include <string>

#include <gpuxfer/error.hpp>

#include "bootstrap/secret.hpp"
#include "bootstrap/socket.hpp"
#include "node/environment.hpp"

namespace gpuxfer::detail {
namespace {

// One launcher's variable names, in the order rank, world size, local rank.
struct Launcher {
  const char* name;
  const char* rank;
  const char* world_size;
  const char* local_rank;
};

constexpr Launcher launchers[] = {
    {"gpuxfer", "GPUXFER_RANK", "GPUXFER_WORLD_SIZE", "GPUXFER_LOCAL_RANK"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    // Open MPI's before Slurm's: mpirun inside an sbatch or salloc allocation starts every rank with the
    // batch step's SLURM_PROCID, while it sets OMPI_COMM_WORLD_* per process.
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

[[noreturn]] void bad(const std::string& variable, const std::string& value, const std::string& why) {
  throw Error(Errc::invalid_option, variable + "='" + value + "': " + why);
}

std::string require(const EnvLookup& lookup, const std::string& variable, const std::string& because) {
  auto value = lookup(variable);
  if (!value) throw Error(Errc::invalid_option, variable + " is not set (" + because + ")");
  return *value;
}

// GPUXFER_INIT, else MASTER_ADDR and the port after MASTER_PORT, else nothing. MASTER_PORT itself is
// torch.distributed's: torchrun's agent serves its store there (TORCHELASTIC_USE_AGENT_STORE), or the
// program's own init_process_group listens there.
std::optional<InitAddress> find_address(const EnvLookup& lookup) {
  if (const auto init = lookup("GPUXFER_INIT")) return parse_init_address(*init, "GPUXFER_INIT");
  const auto host = lookup("MASTER_ADDR");
  const auto port = lookup("MASTER_PORT");
  if (!host && !port) return std::nullopt;
  if (!host || host->empty()) {
    throw Error(Errc::invalid_option, "MASTER_PORT is set but MASTER_ADDR is not: set both, or GPUXFER_INIT");
  }
  if (!port)
    throw Error(Errc::invalid_option, "MASTER_ADDR is set but MASTER_PORT is not: set both, or GPUXFER_INIT");
  InitAddress address = tcp_address(*host, *port, "MASTER_PORT");
  if (address.port == 65535) {
    bad("MASTER_PORT", *port, "gpuxfer listens on the port after it, and there is none: set GPUXFER_INIT");
  }
  ++address.port;
  return address;
}

// GPUXFER_LISTEN_ADDR: a numeric address, not a name (which might resolve to another one on rank 0's host).
std::string read_listen_addr(const EnvLookup& lookup) {
  const auto value = lookup("GPUXFER_LISTEN_ADDR");
  if (!value) return {};
  if (!is_numeric_address(*value)) {
    bad("GPUXFER_LISTEN_ADDR", *value,
        "expected a numeric address of rank 0's host, or 0.0.0.0 (every IPv4 interface) or :: (every "
        "interface)");
  }
  return *value;
}

// GPUXFER_LISTEN_FD: the descriptor of the socket gpuxfer launch listens on for rank 0; -1 when unset.
int read_listen_fd(const EnvLookup& lookup) {
  if (!lookup("GPUXFER_LISTEN_FD")) return -1;
  return read_env_count(lookup, "GPUXFER_LISTEN_FD", "", 0);
}

LaunchEnv read_ranks(const EnvLookup& lookup, const Launcher& launcher) {
  const std::string because = std::string("it must be set with ") + launcher.rank;
  LaunchEnv env;
  env.launcher = launcher.name;
  env.world_size = read_env_count(lookup, launcher.world_size, because, 1);
  if (env.world_size > max_world_size) {
    bad(launcher.world_size, std::to_string(env.world_size),
        "at most " + std::to_string(max_world_size) + " ranks (is it a typo?)");
  }
  env.rank = read_env_count(lookup, launcher.rank, because, 0);
  if (env.rank >= env.world_size) {
    bad(launcher.rank, std::to_string(env.rank),
        std::string("out of range: ") + launcher.world_size + "=" + std::to_string(env.world_size) +
            " allows ranks 0 to " + std::to_string(env.world_size - 1));
  }
  // gpuxfer launch always sets the local rank; by hand, one node is the likely case.
  env.local_rank =
      lookup(launcher.local_rank) ? read_env_count(lookup, launcher.local_rank, because, 0) : env.rank;
  if (env.local_rank >= env.world_size) {
    bad(launcher.local_rank, std::to_string(env.local_rank),
        std::string("out of range: a local rank is below ") + launcher.world_size + "=" +
            std::to_string(env.world_size));
  }
  return env;
}

// The job's name, as read_launch_env says.
std::string read_job(const EnvLookup& lookup, const std::string& launcher) {
  if (const auto named = lookup("GPUXFER_JOB_ID")) {
    if (named->size() > max_job_bytes) {
      bad("GPUXFER_JOB_ID", named->substr(0, 40) + "...",
          "at most " + std::to_string(max_job_bytes) + " bytes (" + std::to_string(named->size()) +
              " given)");
    }
    return *named;
  }
  std::optional<std::string> own;
  if (launcher == "torchrun") {
    own = lookup("TORCHELASTIC_RUN_ID");
  } else if (launcher == "openmpi") {
    own = lookup("OMPI_MCA_ess_base_jobid");
    if (!own) own = lookup("PMIX_NAMESPACE");
  } else if (launcher == "slurm") {
    own = lookup("SLURM_JOB_ID");
    const auto step = lookup("SLURM_STEP_ID");
    if (own && step) *own += "." + *step;
  }
  if (!own || own->empty()) return {};
  return (launcher + ":" + *own).substr(0, max_job_bytes);
}

}  // namespace

int read_env_count(const EnvLookup& lookup, const std::string& variable, const std::string& because,
                   int least) {
  const std::string value = require(lookup, variable, because);
  int number = 0;
  const auto* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, number);
  if (value.empty() || ec != std::errc{} || ptr != end || number < least) {
    bad(variable, value, "expected an integer of at least " + std::to_string(least));
  }
  return number;
}

std::chrono::milliseconds read_comm_timeout(const EnvLookup& lookup) {
  const auto value = lookup("GPUXFER_TIMEOUT");
  if (!value) return default_comm_timeout;
  double seconds = 0;
  const auto* end = value->data() + value->size();
  const auto [ptr, ec] = std::from_chars(value->data(), end, seconds);
  if (value->empty() || ec != std::errc{} || ptr != end || !(seconds >= 0.001) || seconds > 1e6) {
    bad("GPUXFER_TIMEOUT", *value, "expected seconds, from 0.001 to 1000000 (for example 300 or 2.5)");
  }
  return std::chrono::milliseconds(std::llround(seconds * 1000));
}

LaunchEnv read_launch_env(const EnvLookup& lookup) {
  const auto timeout = read_comm_timeout(lookup);
  for (const Launcher& launcher : launchers) {
    if (!lookup(launcher.rank)) continue;
    LaunchEnv env = read_ranks(lookup, launcher);
    env.timeout = timeout;
    env.job = read_job(lookup, env.launcher);
    if (env.world_size > 1) env.secret = read_job_secret(lookup);
    if (auto address = find_address(lookup)) {
      env.init = std::move(*address);
      if (env.init.kind == InitAddress::Kind::tcp) {
        env.init.listen_host = read_listen_addr(lookup);
        if (env.rank == 0 && env.world_size > 1) env.listen_fd = read_listen_fd(lookup);
      }
    } else if (env.world_size > 1) {
      throw Error(Errc::invalid_option,
                  std::string(launcher.rank) + " is set (" + launcher.name + ") with " + launcher.world_size +
                      "=" + std::to_string(env.world_size) +
                      " but no rendezvous address: set GPUXFER_INIT=tcp://<rank 0's host>:<port> (or "
                      "file:///<shared path>), or MASTER_ADDR and MASTER_PORT");
    }
    return env;
  }
  for (const char* orphan : {"GPUXFER_WORLD_SIZE", "GPUXFER_LOCAL_RANK"}) {
    if (const auto value = lookup(orphan)) {
      bad(orphan, *value, "set without GPUXFER_RANK: set GPUXFER_RANK too, or neither");
    }
  }
  LaunchEnv single;
  single.timeout = timeout;
  single.job = read_job(lookup, single.launcher);
  return single;
}

LaunchEnv launch_env_from_process() { return read_launch_env(process_env_lookup()); }

}  // namespace gpuxfer::detail
