// gpuxfer-bench --ranks without a GPU: its command line, its operations and their references, where the
// references may run, how the ranks' samples combine, and the tables and headline ratios it prints.
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include <gpuxfer/error.hpp>

#include "options.hpp"
#include "ranks/rank_ops.hpp"
#include "ranks/rank_plan.hpp"
#include "report.hpp"

namespace gpuxfer::bench {
namespace {

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t GiB = std::size_t{1} << 30;

std::variant<BenchOptions, int> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "gpuxfer-bench");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

BenchOptions parsed(std::vector<std::string> args) {
  std::variant<BenchOptions, int> result = parse(std::move(args));
  EXPECT_TRUE(std::holds_alternative<BenchOptions>(result));
  return std::holds_alternative<BenchOptions>(result) ? std::get<BenchOptions>(result) : BenchOptions{};
}

TEST(BenchRanksOptions, RanksGoFrom4KiBTo1GiBInPowersOf4ByDefault) {
  const BenchOptions o = parsed({"--ranks"});
  EXPECT_TRUE(o.ranks);
  const std::vector<std::size_t> sizes{4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB,
                                       4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1 * GiB};
  EXPECT_EQ(o.sizes, sizes);
  EXPECT_EQ(o.iters, 10);
}

TEST(BenchRanksOptions, OneProcessStillStopsAt256MiB) {
  const BenchOptions o = parsed({});
  EXPECT_FALSE(o.ranks);
  EXPECT_EQ(o.sizes.back(), 256 * MiB);
}

TEST(BenchRanksOptions, SizesItersOpsAndShortModeApplyToRanks) {
  const BenchOptions o = parsed({"--ranks", "-b", "1M", "-e", "64M", "--iters", "7", "--ops",
                                 "rank_bcast,rank_copy", "--json", "out.json"});
  EXPECT_EQ(o.sizes, (std::vector<std::size_t>{1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB}));
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.ops, (std::vector<std::string>{"rank_bcast", "rank_copy"}));
  EXPECT_EQ(o.json_path, "out.json");
  const BenchOptions s = parsed({"--ranks", "--short"});
  EXPECT_EQ(s.sizes, short_sizes);
  EXPECT_EQ(s.iters, short_iters);
}

TEST(BenchRanksOptions, DevicesMeanNothingWithRanks) {
  const std::variant<BenchOptions, int> r = parse({"--ranks", "--devices", "0,1"});
  ASSERT_TRUE(std::holds_alternative<int>(r));
  EXPECT_NE(std::get<int>(r), 0);
}

TEST(BenchRanksOps, AllSixByDefaultInRunOrder) {
  std::vector<std::string> names;
  for (const RankOp* op : select_rank_ops({})) names.push_back(op->spec.name);
  EXPECT_EQ(names, (std::vector<std::string>{"rank_gather_to_host", "rank_gather", "rank_bcast_from_host",
                                             "rank_bcast", "rank_all_gather", "rank_copy"}));
}

TEST(BenchRanksOps, ASelectionKeepsRunOrderAndAnUnknownNameIsRefusedNamingTheKnownOnes) {
  const std::vector<const RankOp*> ops = select_rank_ops({"rank_copy", "rank_gather_to_host"});
  ASSERT_EQ(ops.size(), 2U);
  EXPECT_EQ(ops[0]->spec.name, "rank_gather_to_host");
  EXPECT_EQ(ops[1]->spec.name, "rank_copy");
  try {
    static_cast<void>(select_rank_ops({"gather"}));
    FAIL() << "an in-process operation was taken for a cross-process one";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_option);
    EXPECT_NE(e.message().find("known: rank_gather_to_host,"), std::string::npos) << e.message();
  }
}

TEST(BenchRanksOps, GatherToHostIsHeldTo095OfTheInProcessGather) {
  const RankOp& op = *select_rank_ops({"rank_gather_to_host"}).front();
  EXPECT_EQ(op.spec.ceiling, std::vector<std::string>{"gather"});
  ASSERT_TRUE(op.spec.target.has_value());
  EXPECT_DOUBLE_EQ(*op.spec.target, 0.95);
  EXPECT_EQ(op.spec.bytes.count(MiB, 2), 2 * MiB);                                    // size x ranks
  EXPECT_EQ(select_rank_ops({"rank_bcast"}).front()->spec.bytes.count(MiB, 2), MiB);  // the payload
}

TEST(BenchRanksOps, ReferencesAreTheInProcessOperationsOnceEachWithNoCeilingOrTargetOfTheirOwn) {
  const std::vector<OpSpec> refs = rank_references(select_rank_ops({}));
  std::vector<std::string> names;
  for (const OpSpec& r : refs) {
    names.push_back(r.name);
    EXPECT_TRUE(r.ceiling.empty()) << r.name;
    EXPECT_FALSE(r.target.has_value()) << r.name;
    EXPECT_FALSE(r.one_device_target.has_value()) << r.name;
    EXPECT_TRUE(r.bound.empty()) << r.name;
    EXPECT_TRUE(static_cast<bool>(r.run)) << r.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"gather", "gather_to_device", "bcast_pinned", "bcast_device",
                                             "ceiling_nccl_all_gather", "copy_peer"}));
  EXPECT_EQ(refs[4].kind, Kind::ceiling);
  EXPECT_EQ(refs[0].kind, Kind::gpuxfer);
  EXPECT_EQ(rank_references(select_rank_ops({"rank_gather_to_host", "rank_gather_to_host"})).size(), 1U);
}

RankPlace place(int rank, std::string host, std::string bus) {
  return {rank, rank, std::move(host), std::move(bus), "NVIDIA H200"};
}

std::optional<int> bus_ordinal(const std::string& bus) {
  if (bus == "0000:19:00.0") return 0;
  if (bus == "0000:3b:00.0") return 1;
  return std::nullopt;
}

TEST(BenchRanksPlan, RanksOfOneHostOnTheirOwnGpusGiveRank0sOrdinalsInRankOrder) {
  const ReferencePlan plan =
      plan_references({place(0, "h", "0000:3b:00.0"), place(1, "h", "0000:19:00.0")}, bus_ordinal);
  EXPECT_EQ(plan.why_not, "");
  EXPECT_EQ(plan.ordinals, (std::vector<int>{1, 0}));
}

TEST(BenchRanksPlan, NoReferencesAcrossHostsOnASharedGpuOrOnAGpuRank0CannotSee) {
  const ReferencePlan hosts =
      plan_references({place(0, "a", "0000:19:00.0"), place(1, "b", "0000:19:00.0")}, bus_ordinal);
  EXPECT_TRUE(hosts.ordinals.empty());
  EXPECT_NE(hosts.why_not.find("2 hosts"), std::string::npos) << hosts.why_not;
  const ReferencePlan shared =
      plan_references({place(0, "h", "0000:19:00.0"), place(1, "h", "0000:19:00.0")}, bus_ordinal);
  EXPECT_NE(shared.why_not.find("ranks 0 and 1 share GPU 0000:19:00.0"), std::string::npos) << shared.why_not;
  const ReferencePlan hidden =
      plan_references({place(0, "h", "0000:19:00.0"), place(1, "h", "0000:cc:00.0")}, bus_ordinal);
  EXPECT_NE(hidden.why_not.find("rank 1's GPU 0000:cc:00.0 is not visible to rank 0"), std::string::npos)
      << hidden.why_not;
}

TEST(BenchRanksPlan, AJobSampleIsTheSlowestRankAndEveryRanksWrongBytes) {
  const std::vector<Sample> ranks{{0.002, 0}, {0.005, 3}, {0.001, 4}};
  const Sample job = combine_samples(ranks);
  EXPECT_DOUBLE_EQ(job.seconds, 0.005);
  EXPECT_EQ(job.wrong, 7U);
}

TEST(BenchRanksPlan, LinesAndJsonNameTheRanksAndWhereTheReferencesRan) {
  const std::vector<RankPlace> places{place(0, "h", "0000:19:00.0"), place(1, "h", "0000:3b:00.0")};
  const std::vector<std::string> ran = ranks_lines(places, {{0, 1}, ""}, 2, 10);
  ASSERT_EQ(ran.size(), 3U);
  EXPECT_EQ(
      ran[0],
      "# ranks: 2: [0] h device 0 NVIDIA H200 (0000:19:00.0), [1] h device 1 NVIDIA H200 (0000:3b:00.0)");
  EXPECT_NE(ran[1].find("slowest rank's time; median of 10 samples after 2 warm-up"), std::string::npos)
      << ran[1];
  EXPECT_NE(ran[2].find("on ordinals 0,1"), std::string::npos) << ran[2];
  const std::vector<std::string> not_run = ranks_lines(places, {{}, "why"}, 2, 10);
  EXPECT_EQ(not_run[2], "# references: not run: why");
  const nlohmann::ordered_json j = ranks_json(places, {{}, "why"});
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["places"][1]["pci_bus_id"], "0000:3b:00.0");
  EXPECT_EQ(j["references"]["why_not"], "why");
}

Stats stats_of(double seconds, std::size_t wrong = 0) {
  Stats s;
  s.median_s = s.min_s = s.max_s = seconds;
  s.samples = 5;
  s.wrong = wrong;
  return s;
}

// The report of a world of two: the reference's table, then the rank operation's with the ratio to it.
struct ReportOf {
  std::ostringstream out;
  Report report{out, 2, {4 * KiB, 256 * MiB}};
  std::vector<OpSpec> refs = rank_references(select_rank_ops({"rank_gather_to_host"}));
  const OpSpec& op = select_rank_ops({"rank_gather_to_host"}).front()->spec;

  void rows(double reference_s, double rank_s, std::size_t wrong = 0) {
    report.begin(refs[0]);
    report.add(refs[0], 256 * MiB, stats_of(reference_s));
    report.end(refs[0]);
    report.begin(op);
    report.add(op, 256 * MiB, stats_of(rank_s, wrong));
    report.end(op);
    report.finish();
  }
};

TEST(BenchRanksReport, TheRatioIsToTheReferenceAtTheSameSizeAndMeetsTheTarget) {
  ReportOf r;
  r.rows(0.010, 0.0104);  // 0.962 x
  const std::string text = r.out.str();
  EXPECT_NE(text.find("# rank_gather_to_host [gpuxfer]"), std::string::npos) << text;
  EXPECT_NE(text.find("ceiling = gather; target >= 0.95"), std::string::npos) << text;
  EXPECT_NE(text.find("= 0.962 x gather"), std::string::npos) << text;
  EXPECT_NE(text.find("# rank_gather_to_host         0.962    0.0%  gather"), std::string::npos) << text;
  EXPECT_NE(text.find("met"), std::string::npos) << text;
  EXPECT_NE(text.find("gpuxfer-bench: OK: 0 wrong bytes"), std::string::npos) << text;
  const nlohmann::ordered_json j = r.report.json(RunnerInfo{}, BenchOptions{});
  EXPECT_NEAR(j["headline"]["ratios"]["rank_gather_to_host"].get<double>(), 0.010 / 0.0104, 1e-9);
  EXPECT_EQ(j["headline"]["entries"][0]["met"], true);
  EXPECT_EQ(j["results"][1]["ceiling_op"], "gather");
  EXPECT_EQ(j["results"][0]["ratio"], nullptr);  // the reference is ranked against nothing
}

TEST(BenchRanksReport, AReferenceMeasuredInterleavedIsStillRankedAgainstNothing) {
  ReportOf r;
  Stats interleaved = stats_of(0.010);
  interleaved.baseline_s = 0.0099;  // as measure_interleaved leaves it
  interleaved.rounds = {{0.010, 0.0099}};
  r.report.begin(r.refs[0]);
  r.report.add(r.refs[0], 256 * MiB, interleaved);
  r.report.end(r.refs[0]);
  r.report.finish();
  const nlohmann::ordered_json j = r.report.json(RunnerInfo{}, BenchOptions{});
  EXPECT_EQ(j["results"][0]["ratio"], nullptr);
  EXPECT_EQ(r.out.str().find("interleaved"), std::string::npos) << r.out.str();
}

TEST(BenchRanksReport, BelowTheTargetOrWrongBytesAreSaid) {
  ReportOf r;
  r.rows(0.010, 0.011, 5);  // 0.909 x
  const std::string text = r.out.str();
  EXPECT_NE(text.find("BELOW"), std::string::npos) << text;
  EXPECT_NE(text.find("WRONG DATA"), std::string::npos) << text;
  EXPECT_NE(text.find("gpuxfer-bench: FAILED: 5 wrong bytes"), std::string::npos) << text;
}

TEST(BenchRanksReport, AWaivedReferenceLeavesTheRowWithoutARatioAndTheHeadlineSaysWhy) {
  ReportOf r;
  r.report.waive(r.refs[0], "the ranks run on 2 hosts");
  r.report.begin(r.op);
  r.report.add(r.op, 256 * MiB, stats_of(0.01));
  r.report.end(r.op);
  r.report.finish();
  const std::string text = r.out.str();
  EXPECT_NE(text.find("# gather: waived: the ranks run on 2 hosts"), std::string::npos) << text;
  EXPECT_NE(text.find("no gather measured"), std::string::npos) << text;
  EXPECT_EQ(r.report.wrong(), 0U);
}

}  // namespace
}  // namespace gpuxfer::bench
