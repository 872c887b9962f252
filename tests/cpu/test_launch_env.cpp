// The launch environment of a job of several processes (src/bootstrap/launch_env): each launcher's variables,
// their precedence, the rendezvous address and GPUXFER_TIMEOUT, and an error naming the variable and the
// value for every bad one.
#include <chrono>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootstrap/launch_env.hpp"
#include "bootstrap/secret.hpp"
#include "common/env.hpp"
#include "common/expect_error.hpp"

namespace gpuxfer {
namespace {

using detail::InitAddress;
using detail::LaunchEnv;
using test::FakeEnv;
using test::throws_error;

LaunchEnv read(std::map<std::string, std::string> values) {
  FakeEnv env(std::move(values));
  return detail::read_launch_env(env.lookup());
}

TEST(LaunchEnv, NothingSetIsOneProcess) {
  const LaunchEnv env = read({});
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.init.kind, InitAddress::Kind::none);
  EXPECT_EQ(env.launcher, "none");
  EXPECT_EQ(env.timeout, detail::default_comm_timeout);
}

TEST(LaunchEnv, Gpuxfer) {
  const LaunchEnv env = read({{"GPUXFER_RANK", "2"},
                              {"GPUXFER_WORLD_SIZE", "4"},
                              {"GPUXFER_LOCAL_RANK", "1"},
                              {"GPUXFER_INIT", "tcp://node-a:29500"},
                              {"GPUXFER_TIMEOUT", "2.5"}});
  EXPECT_EQ(env.launcher, "gpuxfer");
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.init.kind, InitAddress::Kind::tcp);
  EXPECT_EQ(env.init.host, "node-a");
  EXPECT_EQ(env.init.port, 29500);
  EXPECT_EQ(env.timeout, std::chrono::milliseconds(2500));
}

TEST(LaunchEnv, GpuxferLocalRankDefaultsToTheRank) {
  const LaunchEnv env =
      read({{"GPUXFER_RANK", "3"}, {"GPUXFER_WORLD_SIZE", "4"}, {"GPUXFER_INIT", "file:///tmp/x"}});
  EXPECT_EQ(env.local_rank, 3);
  EXPECT_EQ(env.init.kind, InitAddress::Kind::file);
  EXPECT_EQ(env.init.path, "/tmp/x");
}

TEST(LaunchEnv, Torchrun) {
  const LaunchEnv env = read({{"RANK", "1"},
                              {"WORLD_SIZE", "2"},
                              {"LOCAL_RANK", "0"},
                              {"MASTER_ADDR", "10.0.0.1"},
                              {"MASTER_PORT", "29400"}});
  EXPECT_EQ(env.launcher, "torchrun");
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.world_size, 2);
  EXPECT_EQ(env.local_rank, 0);
  // MASTER_PORT is torch.distributed's (torchrun's agent store listens there): gpuxfer takes the next,
  // on MASTER_ADDR's address alone.
  EXPECT_EQ(env.init.to_string(), "tcp://10.0.0.1:29401");
  EXPECT_EQ(env.init.listen_at(), "10.0.0.1");
  EXPECT_EQ(env.listen_fd, -1);
}

// GPUXFER_LISTEN_ADDR says where rank 0 listens instead (0.0.0.0, ::: every interface); a name is refused,
// as it could resolve to another address on rank 0's host. GPUXFER_LISTEN_FD is rank 0's alone.
TEST(LaunchEnv, ListenAddrAndListenFd) {
  for (const std::string listen : {"0.0.0.0", "::", "10.0.0.1", "fe80::1"}) {
    const LaunchEnv env = read({{"RANK", "0"},
                                {"WORLD_SIZE", "2"},
                                {"MASTER_ADDR", "node-a"},
                                {"MASTER_PORT", "29400"},
                                {"GPUXFER_LISTEN_ADDR", listen}});
    EXPECT_EQ(env.init.host, "node-a");
    EXPECT_EQ(env.init.listen_at(), listen);
  }
  EXPECT_TRUE(throws_error(
      [] {
        (void)read({{"GPUXFER_RANK", "0"},
                    {"GPUXFER_WORLD_SIZE", "2"},
                    {"GPUXFER_INIT", "tcp://127.0.0.1:7000"},
                    {"GPUXFER_LISTEN_ADDR", "localhost"}});
      },
      Errc::invalid_option, "GPUXFER_LISTEN_ADDR='localhost'", "0.0.0.0"));
  const std::map<std::string, std::string> job{
      {"GPUXFER_WORLD_SIZE", "2"}, {"GPUXFER_INIT", "tcp://127.0.0.1:7000"}, {"GPUXFER_LISTEN_FD", "5"}};
  auto rank = [&](const char* number) {
    auto values = job;
    values.emplace("GPUXFER_RANK", number);
    return read(values);
  };
  EXPECT_EQ(rank("0").listen_fd, 5);
  EXPECT_EQ(rank("1").listen_fd, -1) << "the listening socket is rank 0's";
}

TEST(LaunchEnv, AMasterPortWithoutANextPortIsRefused) {
  EXPECT_TRUE(throws_error(
      [] {
        (void)read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "65535"}});
      },
      Errc::invalid_option, "MASTER_PORT='65535'", "the port after it", "GPUXFER_INIT"));
  const LaunchEnv last =
      read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "65534"}});
  EXPECT_EQ(last.init.port, 65535);
}

TEST(LaunchEnv, GpuxferInitWinsOverMaster) {
  const LaunchEnv env = read({{"RANK", "0"},
                              {"WORLD_SIZE", "2"},
                              {"MASTER_ADDR", "10.0.0.1"},
                              {"MASTER_PORT", "29400"},
                              {"GPUXFER_INIT", "tcp://[::1]:7000"}});
  EXPECT_EQ(env.init.host, "::1");
  EXPECT_EQ(env.init.port, 7000);
  EXPECT_EQ(env.init.to_string(), "tcp://[::1]:7000");
  EXPECT_EQ(env.init.listen_at(), "::1") << "GPUXFER_INIT's host is where rank 0 listens";
}

TEST(LaunchEnv, SlurmTakesTheAddressFromMaster) {
  const LaunchEnv env = read({{"SLURM_PROCID", "5"},
                              {"SLURM_NTASKS", "8"},
                              {"SLURM_LOCALID", "1"},
                              {"MASTER_ADDR", "n1"},
                              {"MASTER_PORT", "1234"}});
  EXPECT_EQ(env.launcher, "slurm");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.init.to_string(), "tcp://n1:1235");
}

TEST(LaunchEnv, OpenMpiTakesTheAddressFromGpuxferInit) {
  const LaunchEnv env = read({{"OMPI_COMM_WORLD_RANK", "1"},
                              {"OMPI_COMM_WORLD_SIZE", "2"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                              {"GPUXFER_INIT", "file:///shared/job"}});
  EXPECT_EQ(env.launcher, "openmpi");
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.init.path, "/shared/job");
}

// Open MPI's variables before Slurm's: mpirun inside an sbatch or salloc allocation starts every rank with
// the batch step's SLURM_PROCID (0, or the node's index), while mpirun sets OMPI_COMM_WORLD_* per process.
TEST(LaunchEnv, PrecedenceIsGpuxferTorchrunOpenMpiSlurm) {
  std::map<std::string, std::string> all{{"GPUXFER_RANK", "1"},
                                         {"GPUXFER_WORLD_SIZE", "2"},
                                         {"RANK", "2"},
                                         {"WORLD_SIZE", "3"},
                                         {"LOCAL_RANK", "0"},
                                         {"OMPI_COMM_WORLD_RANK", "4"},
                                         {"OMPI_COMM_WORLD_SIZE", "5"},
                                         {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                         {"SLURM_PROCID", "3"},
                                         {"SLURM_NTASKS", "4"},
                                         {"SLURM_LOCALID", "0"},
                                         {"GPUXFER_INIT", "tcp://h:1"}};
  EXPECT_EQ(read(all).launcher, "gpuxfer");
  all.erase("GPUXFER_RANK");
  all.erase("GPUXFER_WORLD_SIZE");
  EXPECT_EQ(read(all).launcher, "torchrun");
  all.erase("RANK");
  const LaunchEnv mpi = read(all);
  EXPECT_EQ(mpi.launcher, "openmpi");
  EXPECT_EQ(mpi.rank, 4);
  EXPECT_EQ(mpi.world_size, 5);
  all.erase("OMPI_COMM_WORLD_RANK");
  const LaunchEnv slurm = read(all);
  EXPECT_EQ(slurm.launcher, "slurm");
  EXPECT_EQ(slurm.rank, 3);
  EXPECT_EQ(slurm.world_size, 4);
}

TEST(LaunchEnv, MpirunInsideASlurmAllocationTakesOpenMpisRank) {
  const LaunchEnv env = read({{"SLURM_PROCID", "0"},
                              {"SLURM_NTASKS", "1"},
                              {"SLURM_LOCALID", "0"},
                              {"OMPI_COMM_WORLD_RANK", "2"},
                              {"OMPI_COMM_WORLD_SIZE", "4"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                              {"GPUXFER_INIT", "tcp://h:1"}});
  EXPECT_EQ(env.launcher, "openmpi");
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 2);
}

// A world size past any job's is a typo, refused before a rank builds per-rank tables for it.
TEST(LaunchEnv, AnAbsurdWorldSizeIsRefused) {
  try {
    (void)read({{"GPUXFER_RANK", "0"}, {"GPUXFER_WORLD_SIZE", "2000000000"}, {"GPUXFER_INIT", "tcp://h:1"}});
    FAIL() << "a world of 2e9 ranks was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_option);
    EXPECT_NE(std::string(e.what()).find("GPUXFER_WORLD_SIZE='2000000000'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at most 1048576"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read({{"GPUXFER_RANK", "0"}, {"GPUXFER_WORLD_SIZE", "1048576"}, {"GPUXFER_INIT", "tcp://h:1"}})
                .world_size,
            1048576);
}

// The job's name, which both rendezvous compare to refuse a process of another job: the launcher's own
// (torchrun's run id, Open MPI's job id or PMIx namespace, Slurm's job and step), GPUXFER_JOB_ID over it.
TEST(LaunchEnv, TheJobIsTheLaunchersOwn) {
  const std::map<std::string, std::string> torchrun{
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  EXPECT_EQ(read(torchrun).job, "");
  auto with_run_id = torchrun;
  with_run_id["TORCHELASTIC_RUN_ID"] = "run-7";
  EXPECT_EQ(read(with_run_id).job, "torchrun:run-7");
  const std::map<std::string, std::string> slurm{
      {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "4242"}, {"GPUXFER_INIT", "tcp://h:1"}};
  EXPECT_EQ(read(slurm).job, "slurm:4242");
  auto with_step = slurm;
  with_step["SLURM_STEP_ID"] = "3";
  EXPECT_EQ(read(with_step).job, "slurm:4242.3");
  const std::map<std::string, std::string> openmpi{{"OMPI_COMM_WORLD_RANK", "1"},
                                                   {"OMPI_COMM_WORLD_SIZE", "2"},
                                                   {"PMIX_NAMESPACE", "prterun-h-99@1"},
                                                   {"GPUXFER_INIT", "tcp://h:1"}};
  EXPECT_EQ(read(openmpi).job, "openmpi:prterun-h-99@1");
  auto with_jobid = openmpi;
  with_jobid["OMPI_MCA_ess_base_jobid"] = "3735879681";
  EXPECT_EQ(read(with_jobid).job, "openmpi:3735879681");
  // mpirun inside a Slurm allocation: Open MPI's ranks, Open MPI's job, not the batch step's.
  auto inside_slurm = with_jobid;
  inside_slurm["SLURM_PROCID"] = "0";
  inside_slurm["SLURM_NTASKS"] = "1";
  inside_slurm["SLURM_JOB_ID"] = "4242";
  EXPECT_EQ(read(inside_slurm).job, "openmpi:3735879681");
  auto named = with_step;
  named["GPUXFER_JOB_ID"] = "mine";
  EXPECT_EQ(read(named).job, "mine");
  EXPECT_EQ(read({{"GPUXFER_RANK", "0"}, {"GPUXFER_WORLD_SIZE", "2"}, {"GPUXFER_INIT", "tcp://h:1"}}).job,
            "");
  EXPECT_EQ(read({{"GPUXFER_JOB_ID", "alone"}}).job, "alone");  // a single process keeps it too
}

TEST(LaunchEnv, OneRankNeedsNoAddress) {
  const LaunchEnv env = read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.init.kind, InitAddress::Kind::none);
}

// Each bad environment, and the texts its error must carry: the variable and its value.
struct BadEnvRow {
  const char* what;
  std::map<std::string, std::string> values;
  std::vector<std::string> texts;
};

class LaunchEnvBad : public ::testing::TestWithParam<BadEnvRow> {};

TEST_P(LaunchEnvBad, NamesTheVariableAndTheValue) {
  const BadEnvRow& row = GetParam();
  EXPECT_TRUE(test::throws_error_containing([&] { (void)read(row.values); }, Errc::invalid_option, row.texts))
      << row.what;
}

const std::map<std::string, std::string> good{
    {"GPUXFER_RANK", "1"}, {"GPUXFER_WORLD_SIZE", "2"}, {"GPUXFER_INIT", "tcp://127.0.0.1:29500"}};

std::map<std::string, std::string> with(std::map<std::string, std::string> base, const std::string& name,
                                        const std::string& value) {
  base[name] = value;
  return base;
}

std::map<std::string, std::string> without(std::map<std::string, std::string> base, const std::string& name) {
  base.erase(name);
  return base;
}

const BadEnvRow bad_rows[] = {
    {"rank not a number", with(good, "GPUXFER_RANK", "one"), {"GPUXFER_RANK", "one"}},
    {"negative rank", with(good, "GPUXFER_RANK", "-1"), {"GPUXFER_RANK", "-1"}},
    {"rank out of range", with(good, "GPUXFER_RANK", "2"), {"GPUXFER_RANK", "'2'", "out of range", "0 to 1"}},
    {"world size zero", with(good, "GPUXFER_WORLD_SIZE", "0"), {"GPUXFER_WORLD_SIZE", "'0'"}},
    {"world size trailing text", with(good, "GPUXFER_WORLD_SIZE", "2x"), {"GPUXFER_WORLD_SIZE", "2x"}},
    {"world size missing", without(good, "GPUXFER_WORLD_SIZE"), {"GPUXFER_WORLD_SIZE", "not set"}},
    {"local rank out of range", with(good, "GPUXFER_LOCAL_RANK", "7"), {"GPUXFER_LOCAL_RANK", "'7'"}},
    {"local rank not a number", with(good, "GPUXFER_LOCAL_RANK", "a"), {"GPUXFER_LOCAL_RANK", "'a'"}},
    {"no address", without(good, "GPUXFER_INIT"), {"GPUXFER_INIT", "MASTER_ADDR", "no rendezvous address"}},
    {"unknown scheme", with(good, "GPUXFER_INIT", "udp://h:1"), {"GPUXFER_INIT", "udp://h:1"}},
    {"port missing", with(good, "GPUXFER_INIT", "tcp://host"), {"GPUXFER_INIT", "tcp://host", "port"}},
    {"port zero", with(good, "GPUXFER_INIT", "tcp://host:0"), {"GPUXFER_INIT", "tcp://host:0", "1 to 65535"}},
    {"port too big", with(good, "GPUXFER_INIT", "tcp://host:65536"), {"GPUXFER_INIT", "65536"}},
    {"host empty", with(good, "GPUXFER_INIT", "tcp://:80"), {"GPUXFER_INIT", "tcp://:80", "host"}},
    {"relative file",
     with(good, "GPUXFER_INIT", "file://tmp/x"),
     {"GPUXFER_INIT", "file://tmp/x", "three slashes"}},
    {"timeout zero", with(good, "GPUXFER_TIMEOUT", "0"), {"GPUXFER_TIMEOUT", "'0'"}},
    {"timeout words", with(good, "GPUXFER_TIMEOUT", "5min"), {"GPUXFER_TIMEOUT", "5min"}},
    {"timeout on one process", {{"GPUXFER_TIMEOUT", "-3"}}, {"GPUXFER_TIMEOUT", "-3"}},
    {"world size without rank", {{"GPUXFER_WORLD_SIZE", "2"}}, {"GPUXFER_WORLD_SIZE", "GPUXFER_RANK"}},
    {"torchrun bad port",
     {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "http"}},
     {"MASTER_PORT", "http"}},
    {"torchrun no port", {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}, {"MASTER_PORT", "not"}},
    {"torchrun no addr", {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}, {"MASTER_ADDR", "not"}},
    {"torchrun rank out of range",
     {{"RANK", "3"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}},
     {"RANK", "'3'", "WORLD_SIZE=2"}},
    {"slurm ntasks bad", {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "many"}}, {"SLURM_NTASKS", "many"}},
    {"slurm no address", {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}, {"SLURM_PROCID", "GPUXFER_INIT"}},
    {"openmpi local rank bad",
     {{"OMPI_COMM_WORLD_RANK", "0"},
      {"OMPI_COMM_WORLD_SIZE", "2"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "x"},
      {"GPUXFER_INIT", "tcp://h:1"}},
     {"OMPI_COMM_WORLD_LOCAL_RANK", "'x'"}},
    {"openmpi size missing", {{"OMPI_COMM_WORLD_RANK", "0"}}, {"OMPI_COMM_WORLD_SIZE", "not set"}},
    {"job id too long",
     with(good, "GPUXFER_JOB_ID", std::string(256, 'j')),
     {"GPUXFER_JOB_ID", "at most 255"}},
};

INSTANTIATE_TEST_SUITE_P(Rows, LaunchEnvBad, ::testing::ValuesIn(bad_rows),
                         [](const ::testing::TestParamInfo<BadEnvRow>& info) {
                           std::string name = info.param.what;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

// The job's secret: hex of at least 128 bits in GPUXFER_SECRET, or in a file of this user's alone named by
// GPUXFER_SECRET_FILE; anything else is refused before a rank connects.
TEST(LaunchEnv, ABadSecretIsRefused) {
  const std::map<std::string, std::string> job{
      {"GPUXFER_RANK", "0"}, {"GPUXFER_WORLD_SIZE", "2"}, {"GPUXFER_INIT", "tcp://127.0.0.1:29500"}};
  const auto with = [&](std::map<std::string, std::string> more) {
    more.insert(job.begin(), job.end());
    return [more] { (void)read(more); };
  };
  EXPECT_TRUE(throws_error(with({{"GPUXFER_SECRET", "0123456789abcdef"}}), Errc::invalid_option,
                           "GPUXFER_SECRET", "128 bits"));
  EXPECT_TRUE(throws_error(with({{"GPUXFER_SECRET", std::string(32, 'x')}}), Errc::invalid_option,
                           "GPUXFER_SECRET", "hex"));
  char path[] = "/tmp/gpuxfer-secret-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string hex(64, 'a');
  ASSERT_EQ(write(fd, hex.data(), hex.size()), static_cast<ssize_t>(hex.size()));
  close(fd);
  ASSERT_EQ(chmod(path, 0644), 0);
  EXPECT_TRUE(throws_error(with({{"GPUXFER_SECRET_FILE", path}}), Errc::invalid_option, "GPUXFER_SECRET_FILE",
                           "chmod 600"));
  ASSERT_EQ(chmod(path, 0600), 0);
  EXPECT_TRUE(throws_error(with({{"GPUXFER_SECRET_FILE", path}, {"GPUXFER_SECRET", hex}}),
                           Errc::invalid_option, "both set"));
  const auto good_file = [&] {
    std::map<std::string, std::string> more{{"GPUXFER_SECRET_FILE", path}};
    more.insert(job.begin(), job.end());
    return more;
  }();
  if (detail::authentication_available()) {
    EXPECT_NO_THROW((void)read(good_file));
  } else {  // a build without libcrypto cannot prove it: refused, saying so
    EXPECT_TRUE(throws_error([&] { (void)read(good_file); }, Errc::invalid_option, "libcrypto"));
  }
  unlink(path);
}

}  // namespace
}  // namespace gpuxfer
