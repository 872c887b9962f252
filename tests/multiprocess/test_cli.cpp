// The `gpuxfer` command's usage errors: exit code 1, one line that names what was wrong, and help that
// shows how to pass the program to `launch`.
#include <string>

#include <gtest/gtest.h>

#include "launch_run.hpp"

namespace {

using gpuxfer::test::has;
using gpuxfer::test::LaunchRun;

LaunchRun cli(const std::string& arguments) {
  return gpuxfer::test::run_shell("timeout -s KILL 60 '" GPUXFER_CLI "' " + arguments);
}

TEST(GpuxferCli, AnUnknownCommandIsNamedAndExitsOne) {
  const LaunchRun run = cli("frobnicate");
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_TRUE(has(run, "gpuxfer: unknown command 'frobnicate'")) << run.output;
  EXPECT_TRUE(has(run, "topo, check, launch, resource-spec")) << run.output;
}

TEST(GpuxferCli, NoCommandExitsOne) {
  const LaunchRun run = cli("");
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_TRUE(has(run, "gpuxfer --help")) << run.output;
}

TEST(GpuxferCli, AnUnknownOptionExitsOne) {
  for (const std::string arguments :
       {"topo --frobnicate", "check --size", "--frobnicate", "launch -n x -- true"}) {
    const LaunchRun run = cli(arguments);
    EXPECT_EQ(run.code, 1) << arguments << ": " << run.output;
    EXPECT_TRUE(run.output.starts_with("gpuxfer: ")) << arguments << ": " << run.output;
  }
}

TEST(GpuxferCli, HelpExitsZero) {
  for (const std::string arguments : {"--help", "topo --help", "--version"}) {
    EXPECT_EQ(cli(arguments).code, 0) << arguments;
  }
}

TEST(GpuxferCli, LaunchHelpShowsTheProgramAfterTwoDashes) {
  const LaunchRun run = cli("launch --help");
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_TRUE(has(run, "gpuxfer launch [OPTIONS] [--] program [args...]")) << run.output;
}

TEST(GpuxferCli, AnErrorOfLaunchSaysGpuxferOnce) {
  const LaunchRun run = cli("launch -n 0 -- true");
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_TRUE(has(run, "gpuxfer: invalid_option: launch -n 0: at least 1 process")) << run.output;
  EXPECT_FALSE(has(run, "gpuxfer launch:")) << run.output;
}

}  // namespace
