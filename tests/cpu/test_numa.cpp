// NUMA placement without the host having it: a faked sysfs of two nodes with a GPU on each says which
// node each device hangs off and which CPUs that node has, and where Options::numa puts each device's
// staging; the CPU list format both ways; GPUXFER_NUMA.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <gpuxfer/options.hpp>

#include "common/env.hpp"
#include "common/expect_error.hpp"
#include "node/numa.hpp"

namespace gpuxfer::test {
namespace {

namespace fs = std::filesystem;

// A sysfs tree in a temporary folder: nodes 0 (CPUs 0-3,8-11) and 1 (CPUs 4-7,12-15), a GPU on each,
// and one whose firmware gives no affinity (-1).
class FakeSysfs {
 public:
  FakeSysfs()
      : root_(fs::temp_directory_path() / ("gpuxfer-sysfs-" + std::to_string(::getpid()) + "-" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(root_);
    write("devices/system/node/node0/cpulist", "0-3,8-11\n");
    write("devices/system/node/node1/cpulist", "4-7,12-15\n");
    write("devices/system/node/possible", "0-1\n");  // not a node: must be ignored
    write("bus/pci/devices/0000:1b:00.0/numa_node", "0\n");
    write("bus/pci/devices/0000:9c:00.0/numa_node", "1\n");
    write("bus/pci/devices/0000:c1:00.0/numa_node", "-1\n");
  }
  ~FakeSysfs() { fs::remove_all(root_); }
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  void write(const std::string& path, const std::string& text) const {
    fs::create_directories((root_ / path).parent_path());
    std::ofstream(root_ / path) << text;
  }
  void remove(const std::string& path) const { fs::remove_all(root_ / path); }
  [[nodiscard]] const fs::path& root() const noexcept { return root_; }

 private:
  fs::path root_;
};

TEST(CpuNuma, DevicesAreFoundOnTheirNodes) {
  const FakeSysfs sysfs;
  EXPECT_EQ(::gpuxfer::detail::numa_nodes(sysfs.root()), (std::vector<int>{0, 1}));
  EXPECT_EQ(::gpuxfer::detail::numa_node_of("00000000:1B:00.0", sysfs.root()), 0);  // the runtime's 8-digit domain
  EXPECT_EQ(::gpuxfer::detail::numa_node_of("0000:9c:00.0", sysfs.root()), 1);
  EXPECT_EQ(::gpuxfer::detail::numa_node_of("0000:c1:00.0", sysfs.root()), -1) << "no affinity on a two-node host";
  EXPECT_EQ(::gpuxfer::detail::numa_node_of("0000:ff:00.0", sysfs.root()), -1) << "a device sysfs does not list";
  EXPECT_EQ(::gpuxfer::detail::cpus_of_node(1, sysfs.root()), (std::vector<int>{4, 5, 6, 7, 12, 13, 14, 15}));
  EXPECT_TRUE(::gpuxfer::detail::cpus_of_node(2, sysfs.root()).empty());
}

TEST(CpuNuma, OnAOneNodeHostEveryDeviceIsOnThatNode) {
  const FakeSysfs sysfs;
  sysfs.remove("devices/system/node/node1");
  EXPECT_EQ(::gpuxfer::detail::numa_node_of("0000:c1:00.0", sysfs.root()), 0);
}

TEST(CpuNuma, StagingGoesWhereThePlacementSays) {
  const FakeSysfs sysfs;
  std::vector<int> device_nodes;
  for (const char* bus : {"0000:1b:00.0", "0000:9c:00.0", "0000:c1:00.0"}) {
    device_nodes.push_back(::gpuxfer::detail::numa_node_of(bus, sysfs.root()));
  }
  const std::size_t nodes = ::gpuxfer::detail::numa_nodes(sysfs.root()).size();
  EXPECT_EQ(::gpuxfer::detail::staging_nodes(device_nodes, NumaPlacement::automatic, nodes), (std::vector<int>{0, 1, -1}));
  EXPECT_EQ(::gpuxfer::detail::staging_nodes(device_nodes, NumaPlacement::on, nodes), (std::vector<int>{0, 1, -1}));
  EXPECT_EQ(::gpuxfer::detail::staging_nodes(device_nodes, NumaPlacement::off, nodes), (std::vector<int>{-1, -1, -1}));
  // One node: automatic leaves placement to cudaHostAlloc, on still binds.
  EXPECT_EQ(::gpuxfer::detail::staging_nodes({0, 0}, NumaPlacement::automatic, 1), (std::vector<int>{-1, -1}));
  EXPECT_EQ(::gpuxfer::detail::staging_nodes({0, 0}, NumaPlacement::on, 1), (std::vector<int>{0, 0}));
}

TEST(CpuNuma, CpuListsParseAndPrintBothWays) {
  EXPECT_EQ(::gpuxfer::detail::parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(::gpuxfer::detail::parse_cpu_list("5"), (std::vector<int>{5}));
  for (const char* bad : {"", "a", "3-1", "1,,2", "-1", "1-"}) {
    EXPECT_TRUE(::gpuxfer::detail::parse_cpu_list(bad).empty()) << "'" << bad << "'";
  }
  EXPECT_EQ(::gpuxfer::detail::format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(::gpuxfer::detail::format_cpu_list({}), "");
  EXPECT_EQ(::gpuxfer::detail::format_cpu_list(::gpuxfer::detail::parse_cpu_list("0-15,32-47")), "0-15,32-47");
}

TEST(CpuNuma, TheEnvironmentChoosesThePlacement) {
  EXPECT_EQ(Options{}.numa, NumaPlacement::automatic);
  for (const auto& [text, want] : std::map<std::string, NumaPlacement>{
           {"auto", NumaPlacement::automatic}, {"ON", NumaPlacement::on}, {" off ", NumaPlacement::off}}) {
    FakeEnv env(std::map<std::string, std::string>{{"GPUXFER_NUMA", text}});
    EXPECT_EQ(apply_env(Options{}, env.lookup()).numa, want) << text;
  }
  FakeEnv bad(std::map<std::string, std::string>{{"GPUXFER_NUMA", "node0"}});
  EXPECT_TRUE(throws_error([&] { (void)apply_env(Options{}, bad.lookup()); }, Errc::invalid_option, "GPUXFER_NUMA=node0",
                           "auto, on or off"));
  EXPECT_EQ(to_string(NumaPlacement::on), "on");
}

}  // namespace
}  // namespace gpuxfer::test
