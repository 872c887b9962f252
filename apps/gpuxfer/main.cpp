// The `gpuxfer` command: parses the command line and dispatches to one subcommand. Every gpuxfer::Error
// that escapes a subcommand ends here as one line, "gpuxfer: <errc>: <message>", and exit code 1.

#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include <gpuxfer/error.hpp>
#include <gpuxfer/version.hpp>

#include "commands.hpp"

namespace {

int dispatch(int argc, char** argv) {
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
      "no FAIL, 2 without a CUDA device");
  check_cmd->add_option("--size", check.size, "Bytes per device (K/M/G/T suffixes, powers of 1024)")
      ->capture_default_str();
  check_cmd->add_option("--seed", check.seed, "Seed of the data patterns")->capture_default_str();

  ResourceSpecArgs spec;
  CLI::App* spec_cmd =
      app.add_subcommand("resource-spec", "Write a ctest resource spec (one \"gpus\" slot per visible GPU)");
  spec_cmd->add_option("-o,--output", spec.output, "File to write (default: stdout)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (*topo_cmd) {
    return run_topo(topo);
  }
  if (*check_cmd) {
    return run_check(check);
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
