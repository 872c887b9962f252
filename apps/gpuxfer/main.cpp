// The `gpuxfer` command: parses the command line and dispatches to one subcommand. Every gpuxfer::Error
// that escapes a subcommand ends here as one line, "gpuxfer: <errc>: <message>", and exit code 1; so does
// a usage error ("gpuxfer: <what>").

#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include <gpuxfer/error.hpp>
#include <gpuxfer/version.hpp>

#include "commands.hpp"

namespace {

// CLI11 2.1 hands what follows "--" to the main app, not to launch's prefix command: cut "-- program..."
// off argv here (only a "--" among launch's own options; one after the program is the program's).
std::vector<std::string> split_off_launch_command(int& argc, char** argv) {
  int i = 1;
  while (i < argc && std::string_view(argv[i]) != "launch") {
    if (argv[i][0] != '-') return {};  // another subcommand
    ++i;
  }
  for (int j = i + 1; j < argc; ++j) {
    const std::string_view arg = argv[j];
    if (arg == "--") {
      std::vector<std::string> command(argv + j + 1, argv + argc);
      argc = j;
      return command;
    }
    if (arg == "-n" || arg == "--nproc" || arg == "--grace" || arg == "--timeout") {
      ++j;  // its value
    } else if (!arg.starts_with('-')) {
      return {};  // the program: everything from here is its own
    }
  }
  return {};
}

constexpr std::string_view commands[] = {"topo", "check", "launch", "resource-spec"};

// What is wrong with the command word, or "" (CLI11 would say only that a subcommand is required, or
// that an argument was not expected).
std::string command_word_error(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help" || arg == "--version") return {};
    if (arg.starts_with('-')) continue;
    for (const std::string_view command : commands) {
      if (arg == command) return {};
    }
    return "unknown command '" + std::string(arg) + "'";
  }
  return "no command given";
}

// `launch` takes the program after its options (CLI11's prefix command): its usage line says so.
class LaunchFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override {
    return "Usage: gpuxfer launch [OPTIONS] [--] program [args...]\n";
  }
};

// A usage error: one line naming it, a pointer to --help, exit code 1 (help and --version exit 0).
int usage_error(const CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  std::cerr << "gpuxfer: " << e.what() << "\nRun 'gpuxfer --help' for the commands and their options.\n";
  return 1;
}

int dispatch(int argc, char** argv) {
  const std::vector<std::string> command_after_dashes = split_off_launch_command(argc, argv);
  using namespace gpuxfer::cli;
  CLI::App app{"gpuxfer: move data between the GPUs of a node and the host"};
  app.set_version_flag("--version", std::string(gpuxfer::version_string));
  app.require_subcommand(1);

  TopoArgs topo;
  CLI::App* topo_cmd = app.add_subcommand("topo", "Devices, NUMA nodes, the peer/link matrix and NCCL");
  topo_cmd->add_flag("--json", topo.json, "Print JSON");

  CheckArgs check;
  CLI::App* check_cmd = app.add_subcommand(
      "check",
      "Run every operation on every path with verification: PASS/FAIL/SKIP per path; exit 0 iff "
      "no FAIL, 2 without a CUDA device. With one GPU the cases run a second time on 2 simulated "
      "devices of it (GPUXFER_SIMULATED_DEVICES)");
  check_cmd->add_option("--size", check.size, "Bytes per device (K/M/G/T suffixes, powers of 1024)")
      ->capture_default_str();
  check_cmd->add_option("--seed", check.seed, "Seed of the data patterns")->capture_default_str();

  ResourceSpecArgs spec;
  CLI::App* spec_cmd =
      app.add_subcommand("resource-spec", "Write a ctest resource spec (one \"gpus\" slot per visible GPU)");
  spec_cmd->add_option("-o,--output", spec.output, "File to write (default: stdout)");

  LaunchArgs launch;
  CLI::App* launch_cmd = app.add_subcommand(
      "launch",
      "Start N processes of one job on this host (GPUXFER_RANK, GPUXFER_LOCAL_RANK, GPUXFER_WORLD_SIZE, "
      "GPUXFER_INIT set), output prefixed by rank; the first failure stops the others and gives its exit "
      "code");
  launch_cmd->add_option("-n,--nproc", launch.ranks, "Processes to start (default: one per visible GPU)");
  launch_cmd
      ->add_option("--grace", launch.grace_seconds,
                   "Seconds between SIGTERM and SIGKILL when stopping ranks (0 to 86400)")
      ->capture_default_str();
  launch_cmd->add_option("--timeout", launch.timeout_seconds,
                         "Seconds after which ranks still running are named, with the exits so far, and "
                         "stopped (exit code 124)");
  launch_cmd->add_flag(
      "--node-per-rank", launch.node_per_rank,
      "Give each rank a node of its own (GPUXFER_NODE_ID=rank<i>): the host operations take the "
      "path between nodes, over NCCL, on this one host");
  launch_cmd->prefix_command();  // everything from the program on is the program's
  launch_cmd->formatter(std::make_shared<LaunchFormatter>());

  if (const std::string error = command_word_error(argc, argv); !error.empty()) {
    std::cerr << "gpuxfer: " << error
              << "; the commands are topo, check, launch, resource-spec (gpuxfer --help)\n";
    return 1;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e);
  }
  if (*topo_cmd) {
    return run_topo(topo);
  }
  if (*check_cmd) {
    return run_check(check);
  }
  if (*launch_cmd) {
    launch.ranks_given = launch_cmd->count("-n") > 0;
    launch.timeout_given = launch_cmd->count("--timeout") > 0;
    launch.command = launch_cmd->remaining();
    launch.command.insert(launch.command.end(), command_after_dashes.begin(), command_after_dashes.end());
    return run_launch(launch);
  }
  return run_resource_spec(spec);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const gpuxfer::Error& e) {
    std::cerr << "gpuxfer: " << gpuxfer::to_string(e.code()) << ": " << e.message() << '\n';
  } catch (const std::exception& e) {
    std::cerr << "gpuxfer: " << e.what() << '\n';
  }
  return 1;
}
