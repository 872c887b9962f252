// Bad input, table-driven, for everything reachable without a GPU: every public function that takes a
// device index, given one past the end; a null manager; every Options field out of range, through
// validate() and through MultiGpuManager::create; every GPUXFER_* variable with values that do not parse
// or are out of range; the parsers; the pinned pool's limit. One row per (function, bad input): the Errc
// it must throw and the words its message must contain (the index, the size, the variable and its value).
// After every row the registry and the pool's statistics are as before. Inputs that need device memory
// (host pointers, freed buffers, sizes past an allocation...) are in tests/gpu/test_bad_input.cpp.
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <gpuxfer/gpuxfer.hpp>

#include "common/env.hpp"
#include "common/expect_error.hpp"

namespace gpuxfer {
namespace {

using test::FakeEnv;
using test::ScopedEnv;

constexpr std::size_t kPoolLimit = std::size_t{1} << 20;

std::string n(std::size_t value) { return std::to_string(value); }

// What a row may use: a manager over whatever devices exist (none on a CPU-only machine), an engine,
// a pool of its own, and indices past the end.
struct World {
  std::shared_ptr<MultiGpuManager> manager;
  std::unique_ptr<InterGpuTransfer> xfer;
  std::unique_ptr<PinnedPool> pool;
  std::size_t count = 0;  // devices of the manager
  std::size_t bad = 0;    // an index past the end
  std::size_t other = 0;  // a second one, for functions with two
  int host_word = 0;
  std::vector<std::byte> data = std::vector<std::byte>(64, std::byte{1});
};

using Texts = std::vector<std::string>;

struct Row {
  std::string name;                          // function_input, the test's name
  std::function<void(World&)> call;          // the bad call
  Errc code;                                 // what it must throw
  std::function<Texts(const World&)> texts;  // what the message must contain
};

// gtest prints a parameter in test listings and failures: the row's name says it all.
void PrintTo(const Row& row, std::ostream* os) { *os << row.name; }

// An index row: the message names the argument, the index and the device count.
Row index_row(std::string name, std::string what, std::function<void(World&)> call) {
  return {std::move(name), std::move(call), Errc::invalid_buffer, [what](const World& w) {
            return Texts{what + " index " + n(w.bad), "is out of range",
                         "the manager has " + n(w.count) + " device"};
          }};
}

std::vector<Row> index_rows() {
  std::vector<Row> rows;
  rows.push_back(index_row("set_device_buffer_index", "set_device_buffer device", [](World& w) {
    w.xfer->set_device_buffer(w.bad, &w.host_word, sizeof w.host_word);
  }));
  rows.push_back(index_row("set_device_buffer_with_stream_index", "set_device_buffer device", [](World& w) {
    w.xfer->set_device_buffer(w.bad, &w.host_word, sizeof w.host_word, cudaStreamLegacy);
  }));
  rows.push_back(index_row("set_device_buffer_null_pointer_and_index", "set_device_buffer device",
                           [](World& w) { w.xfer->set_device_buffer(w.bad, nullptr, 0); }));
  rows.push_back(index_row("clear_device_buffer_index", "clear_device_buffer device",
                           [](World& w) { w.xfer->clear_device_buffer(w.bad); }));
  rows.push_back(index_row("device_buffer_index", "device_buffer device",
                           [](World& w) { (void)w.xfer->device_buffer(w.bad); }));
  rows.push_back(index_row("copy_buffer_source_index", "copy_buffer source device",
                           [](World& w) { w.xfer->copy_buffer(w.bad, w.other, w.data); }));
  rows.push_back(index_row("copy_buffer_empty_data_source_index", "copy_buffer source device",
                           [](World& w) { w.xfer->copy_buffer(w.bad, w.other, {}); }));
  for (const auto& [path, label] :
       {std::pair{CopyPath::automatic, "automatic"}, std::pair{CopyPath::peer, "peer"},
        std::pair{CopyPath::staged, "staged"}}) {
    rows.push_back(index_row(std::string("copy_device_buffer_") + label + "_source_index",
                             "copy_device_buffer source device",
                             [path](World& w) { w.xfer->copy_device_buffer(w.bad, w.other, path); }));
    rows.push_back(index_row(std::string("copy_device_buffer_async_") + label + "_source_index",
                             "copy_device_buffer source device", [path](World& w) {
                               (void)w.xfer->copy_device_buffer_async(w.bad, w.other, path);
                             }));
  }
  for (const auto& [path, label] :
       {std::pair{DeviceBroadcastPath::automatic, "automatic"}, std::pair{DeviceBroadcastPath::nccl, "nccl"},
        std::pair{DeviceBroadcastPath::peer, "peer"}}) {
    rows.push_back(index_row(std::string("broadcast_from_device_") + label + "_root_index",
                             "broadcast_from_device root",
                             [path](World& w) { w.xfer->broadcast_from_device(w.bad, path); }));
  }
  rows.push_back(index_row("gather_destination_index", "gather destination device",
                           [](World& w) { (void)w.xfer->gather(w.bad); }));
  rows.push_back(index_row("gather_blocking_destination_index", "gather destination device",
                           [](World& w) { (void)w.xfer->gather_blocking(w.bad); }));
  rows.push_back(index_row("gather_into_skip_index", "gather_into skipped device",
                           [](World& w) { (void)w.xfer->gather_into(w.data, w.bad); }));
  rows.push_back(index_row("gather_into_empty_output_skip_index", "gather_into skipped device",
                           [](World& w) { (void)w.xfer->gather_into({}, w.bad); }));
  rows.push_back(index_row("gather_slices_slice_index", "gather_slices slice device", [](World& w) {
    const DeviceSlice slices[] = {{w.bad, &w.host_word, sizeof w.host_word}};
    (void)w.xfer->gather_slices(slices, w.data);
  }));
  // An empty slice is skipped, but its device index is still checked.
  rows.push_back(index_row("gather_slices_empty_slice_index", "gather_slices slice device", [](World& w) {
    const DeviceSlice slices[] = {{w.bad, nullptr, 0}};
    (void)w.xfer->gather_slices(slices, {});
  }));
  rows.push_back(
      index_row("gather_to_device_destination_index", "gather_to_device destination device",
                [](World& w) { (void)w.xfer->gather_to_device(w.bad, &w.host_word, sizeof w.host_word); }));
  rows.push_back(index_row("gather_to_device_null_output_index", "gather_to_device destination device",
                           [](World& w) { (void)w.xfer->gather_to_device(w.bad, nullptr, 0); }));
  rows.push_back(
      index_row("manager_device_index", "device", [](World& w) { (void)w.manager->device(w.bad); }));
  rows.push_back(index_row("manager_link_source_index", "source device",
                           [](World& w) { (void)w.manager->link(w.bad, w.other); }));
  rows.push_back(index_row("manager_peer_enabled_source_index", "source device",
                           [](World& w) { (void)w.manager->peer_enabled(w.bad, w.other); }));
  return rows;
}

// One Options field out of range: validate() and MultiGpuManager::create both refuse it.
struct BadOption {
  std::string name;
  std::function<void(Options&)> set;
  Texts texts;
};

std::vector<BadOption> bad_options() {
  return {
      {"min_devices_negative", [](Options& o) { o.min_devices = -1; }, {"min_devices must be >= 0", "-1"}},
      {"devices_negative",
       [](Options& o) {
         o.devices = {0, -2};
       },
       {"devices: ordinal -2 is negative"}},
      {"devices_twice",
       [](Options& o) {
         o.devices = {1, 0, 1};
       },
       {"devices: ordinal 1 is listed twice"}},
      {"chunk_bytes_zero",
       [](Options& o) { o.chunk_bytes = 0; },
       {"chunk_bytes must be at least 4096, got 0"}},
      {"chunk_bytes_below_a_page",
       [](Options& o) { o.chunk_bytes = 4095; },
       {"chunk_bytes must be at least 4096, got 4095"}},
      {"pool_limit_zero",
       [](Options& o) { o.pool_limit_bytes = 0; },
       {"pool_limit_bytes (0) must be at least chunk_bytes (8388608)"}},
      {"pool_limit_below_the_chunk",
       [](Options& o) {
         o.chunk_bytes = std::size_t{4} << 20;
         o.pool_limit_bytes = o.chunk_bytes - 1;
       },
       {"pool_limit_bytes (4194303) must be at least chunk_bytes (4194304)"}},
      {"host_threads_zero",
       [](Options& o) { o.host_threads = 0; },
       {"host_threads must be in 1..256, got 0"}},
      {"host_threads_too_many",
       [](Options& o) { o.host_threads = 257; },
       {"host_threads must be in 1..256, got 257"}},
  };
}

std::vector<Row> option_rows() {
  std::vector<Row> rows;
  for (const BadOption& bad : bad_options()) {
    rows.push_back({"validate_" + bad.name,
                    [set = bad.set](World&) {
                      Options opts;
                      set(opts);
                      opts.validate();
                    },
                    Errc::invalid_option, [texts = bad.texts](const World&) { return texts; }});
    rows.push_back({"create_" + bad.name,
                    [set = bad.set](World&) {
                      Options opts;
                      opts.min_devices = 0;
                      set(opts);
                      (void)MultiGpuManager::create(opts);
                    },
                    Errc::invalid_option, [texts = bad.texts](const World&) { return texts; }});
  }
  // More devices required than exist: no_device, saying how many were found and needed.
  rows.push_back({"create_min_devices_above_the_device_count",
                  [](World& w) {
                    Options opts;
                    opts.min_devices = static_cast<int>(w.count) + 1;
                    (void)MultiGpuManager::create(opts);
                  },
                  Errc::no_device,
                  [](const World& w) {
                    return Texts{"found " + n(w.count) + " usable CUDA device(s), need at least " +
                                 n(w.count + 1)};
                  }});
  rows.push_back({"transfer_null_manager", [](World&) { InterGpuTransfer xfer(nullptr); },
                  Errc::invalid_argument,
                  [](const World&) { return Texts{"InterGpuTransfer needs a manager, got nullptr"}; }});
  return rows;
}

// A GPUXFER_* variable with a bad value: apply_env throws invalid_option naming the variable and value.
std::vector<Row> env_rows() {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      // name suffix, variable, value
      {"devices_not_a_number", "GPUXFER_DEVICES", "0,x"},
      {"devices_negative", "GPUXFER_DEVICES", "-1"},
      {"devices_empty_item", "GPUXFER_DEVICES", "0,,1"},
      {"devices_trailing_comma", "GPUXFER_DEVICES", "0,"},
      {"devices_twice", "GPUXFER_DEVICES", "1,1"},
      {"devices_too_large", "GPUXFER_DEVICES", "99999999999"},
      {"min_devices_negative", "GPUXFER_MIN_DEVICES", "-1"},
      {"min_devices_word", "GPUXFER_MIN_DEVICES", "two"},
      {"min_devices_empty", "GPUXFER_MIN_DEVICES", ""},
      {"min_devices_too_many", "GPUXFER_MIN_DEVICES", "4097"},
      {"peer_access_word", "GPUXFER_PEER_ACCESS", "maybe"},
      {"peer_access_two", "GPUXFER_PEER_ACCESS", "2"},
      {"nccl_two", "GPUXFER_NCCL", "2"},
      {"nccl_word", "GPUXFER_NCCL", "nccl"},
      {"pool_limit_word", "GPUXFER_POOL_LIMIT", "lots"},
      {"pool_limit_bad_suffix", "GPUXFER_POOL_LIMIT", "4X"},
      {"pool_limit_overflow", "GPUXFER_POOL_LIMIT", "99999999999T"},
      {"pool_limit_negative", "GPUXFER_POOL_LIMIT", "-1G"},
      {"pool_limit_zero", "GPUXFER_POOL_LIMIT", "0"},
      {"chunk_bytes_zero", "GPUXFER_CHUNK_BYTES", "0"},
      {"chunk_bytes_below_a_page", "GPUXFER_CHUNK_BYTES", "4095"},
      {"chunk_bytes_word", "GPUXFER_CHUNK_BYTES", "big"},
      {"chunk_bytes_fraction", "GPUXFER_CHUNK_BYTES", "1.5M"},
      {"host_threads_zero", "GPUXFER_HOST_THREADS", "0"},
      {"host_threads_too_many", "GPUXFER_HOST_THREADS", "257"},
      {"host_threads_negative", "GPUXFER_HOST_THREADS", "-3"},
      {"host_threads_word", "GPUXFER_HOST_THREADS", "x"},
      {"host_threads_wraps_32_bits", "GPUXFER_HOST_THREADS", "4294967297"},
  };
  std::vector<Row> rows;
  for (const auto& [suffix, variable, value] : cases) {
    rows.push_back({"env_" + suffix,
                    [variable, value](World&) {
                      FakeEnv env(std::map<std::string, std::string>{{variable, value}});
                      (void)apply_env(Options{}, env.lookup());
                    },
                    Errc::invalid_option,
                    [variable, value](const World&) { return Texts{variable + "=" + value}; }});
  }
  return rows;
}

// The same through the process environment, the way an HPC job sets them: create() refuses.
std::vector<Row> process_env_rows() {
  const std::vector<std::tuple<std::string, const char*, const char*>> cases = {
      {"process_env_chunk_bytes_word", "GPUXFER_CHUNK_BYTES", "big"},
      {"process_env_pool_limit_below_the_chunk", "GPUXFER_POOL_LIMIT", "4K"},
      {"process_env_host_threads_zero", "GPUXFER_HOST_THREADS", "0"},
      {"process_env_devices_twice", "GPUXFER_DEVICES", "0,0"},
      {"process_env_peer_access_word", "GPUXFER_PEER_ACCESS", "sometimes"},
  };
  std::vector<Row> rows;
  for (const auto& [name, variable, value] : cases) {
    rows.push_back({name,
                    [variable, value](World&) {
                      const ScopedEnv min_devices("GPUXFER_MIN_DEVICES", "0");
                      const ScopedEnv bad(variable, value);
                      (void)MultiGpuManager::create(Options::from_env());
                    },
                    Errc::invalid_option,
                    [variable, value](const World&) { return Texts{std::string(variable) + "=" + value}; }});
  }
  return rows;
}

std::vector<Row> parse_rows() {
  std::vector<Row> rows;
  const std::vector<std::pair<std::string, std::string>> sizes = {
      {"empty", ""},
      {"blank", "  "},
      {"word", "abc"},
      {"unknown_suffix", "12Q"},
      {"negative", "-1"},
      {"fraction", "1.5G"},
      {"hex", "0x10"},
      {"overflow_with_suffix", "99999999999T"},
      {"overflow", "18446744073709551616"},
      {"two_numbers", "4 4"},
      {"suffix_only", "MiB"},
  };
  for (const auto& [suffix, text] : sizes) {
    rows.push_back({"parse_size_" + suffix, [text](World&) { (void)parse_size(text); }, Errc::invalid_option,
                    [text](const World&) { return Texts{"'" + text + "'"}; }});
  }
  for (const auto& [suffix, text] : std::vector<std::pair<std::string, std::string>>{
           {"empty", ""}, {"two", "2"}, {"word", "maybe"}, {"negative", "-1"}}) {
    rows.push_back({"parse_bool_" + suffix, [text](World&) { (void)parse_bool(text); }, Errc::invalid_option,
                    [text](const World&) { return Texts{"'" + text + "' is not a boolean"}; }});
  }
  for (const auto& [suffix, text] :
       std::vector<std::pair<std::string, std::string>>{{"word", "a"},
                                                        {"negative", "-1"},
                                                        {"empty_item", "0,,1"},
                                                        {"trailing_comma", "1,"},
                                                        {"leading_comma", ",1"},
                                                        {"too_large", "2147483648"},
                                                        {"spaces_inside", "1 2"}}) {
    rows.push_back({"parse_device_list_" + suffix, [text](World&) { (void)parse_device_list(text); },
                    Errc::invalid_option, [](const World&) { return Texts{"device ordinal"}; }});
  }
  return rows;
}

std::vector<Row> pool_rows() {
  std::vector<Row> rows;
  rows.push_back({"pool_acquire_above_the_limit", [](World& w) { (void)w.pool->acquire(kPoolLimit + 1); },
                  Errc::out_of_memory,
                  [](const World&) {
                    return Texts{"pinned pool limit of " + n(kPoolLimit) + " bytes",
                                 "asked for " + n(kPoolLimit + 1), "GPUXFER_POOL_LIMIT"};
                  }});
  rows.push_back({"pool_acquire_far_above_the_limit",
                  [](World& w) { (void)w.pool->acquire(std::size_t{1} << 62); }, Errc::out_of_memory,
                  [](const World&) { return Texts{"pinned pool limit of " + n(kPoolLimit) + " bytes"}; }});
  rows.push_back({"pool_of_zero_bytes_acquire_one",
                  [](World&) {
                    PinnedPool empty(0);
                    (void)empty.acquire(1);
                  },
                  Errc::out_of_memory,
                  [](const World&) {
                    return Texts{"pinned pool limit of 0 bytes", "asked for 1"};
                  }});
  rows.push_back(
      {"manager_pool_acquire_above_its_limit",
       [](World& w) { (void)w.manager->pinned_pool().acquire(w.manager->options().pool_limit_bytes + 1); },
       Errc::out_of_memory,
       [](const World& w) {
         return Texts{"pinned pool limit of " + n(w.manager->options().pool_limit_bytes) + " bytes"};
       }});
  return rows;
}

std::vector<Row> all_rows() {
  std::vector<Row> rows;
  for (auto part : {index_rows(), option_rows(), env_rows(), process_env_rows(), parse_rows(), pool_rows()}) {
    for (Row& row : part) rows.push_back(std::move(row));
  }
  return rows;
}

// Runs @p call; succeeds when it throws Error(@p code) whose what() contains every one of @p texts.
::testing::AssertionResult throws(const std::function<void()>& call, Errc code, const Texts& texts) {
  try {
    call();
  } catch (const Error& e) {
    if (e.code() != code) {
      return ::testing::AssertionFailure() << "threw Errc::" << to_string(e.code())
                                           << " instead of Errc::" << to_string(code) << ": " << e.what();
    }
    for (const std::string& text : texts) {
      if (std::string(e.what()).find(text) == std::string::npos) {
        return ::testing::AssertionFailure() << "message does not contain '" << text << "': " << e.what();
      }
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-gpuxfer exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw (expected Errc::" << to_string(code) << ")";
}

struct PoolSnapshot {
  std::size_t in_use, held, allocations;
  explicit PoolSnapshot(const PoolStats& s)
      : in_use(s.in_use), held(s.cached + s.pending), allocations(s.allocations) {}
  bool operator==(const PoolSnapshot&) const = default;
};

std::ostream& operator<<(std::ostream& os, const PoolSnapshot& s) {
  return os << "{in_use " << s.in_use << ", cached+pending " << s.held << ", allocations " << s.allocations
            << "}";
}

class CpuBadInput : public ::testing::TestWithParam<Row> {
 protected:
  void SetUp() override {
    Options opts;
    opts.min_devices = 0;
    world_.manager = MultiGpuManager::create(opts);
    world_.xfer = std::make_unique<InterGpuTransfer>(world_.manager);
    world_.pool = std::make_unique<PinnedPool>(kPoolLimit);
    world_.count = world_.manager->device_count();
    world_.bad = world_.count + 7;
    world_.other = world_.count + 12;
  }

  World world_;
};

TEST_P(CpuBadInput, IsRejectedAndChangesNothing) {
  const Row& row = GetParam();
  std::vector<std::optional<RegisteredBuffer>> registry;
  for (std::size_t i = 0; i < world_.count; ++i) registry.push_back(world_.xfer->device_buffer(i));
  const PoolSnapshot manager_pool(world_.manager->pinned_pool().stats());
  const PoolSnapshot own_pool(world_.pool->stats());

  EXPECT_TRUE(throws([&] { row.call(world_); }, row.code, row.texts(world_))) << row.name;

  for (std::size_t i = 0; i < world_.count; ++i) {
    const auto now = world_.xfer->device_buffer(i);
    EXPECT_EQ(now.has_value(), registry[i].has_value()) << "device " << i;
    if (now && registry[i]) {
      EXPECT_EQ(now->ptr, registry[i]->ptr) << "device " << i;
      EXPECT_EQ(now->size, registry[i]->size) << "device " << i;
    }
  }
  EXPECT_EQ(PoolSnapshot(world_.manager->pinned_pool().stats()), manager_pool) << "the manager's pinned pool";
  EXPECT_EQ(PoolSnapshot(world_.pool->stats()), own_pool) << "the pinned pool";
}

INSTANTIATE_TEST_SUITE_P(Rows, CpuBadInput, ::testing::ValuesIn(all_rows()),
                         [](const ::testing::TestParamInfo<Row>& info) { return info.param.name; });

// Zero sizes that are allowed: nothing to do, nothing thrown, nothing allocated.
TEST(CpuZeroSizes, AreAcceptedWhereAllowed) {
  Options opts;
  opts.min_devices = 0;
  const auto manager = MultiGpuManager::create(opts);
  InterGpuTransfer xfer(manager);
  PinnedPool pool(kPoolLimit);
  HostBuffer empty;
  ASSERT_NO_THROW(empty = pool.acquire(0)) << "acquire(0)";
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(pool.stats().allocations, 0u);
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_TRUE(parse_device_list("").empty()) << "an empty list means every device";
  EXPECT_TRUE(parse_device_list("  ").empty());
  if (manager->device_count() == 0) {
    // With no device nothing is registered anywhere: the operations without an index have nothing to do.
    EXPECT_EQ(xfer.gather_slices({}, {}), 0u) << "gather_slices of no slices";
    EXPECT_TRUE(xfer.gather_into({}).empty()) << "gather_into of nothing";
    EXPECT_TRUE(xfer.gather_all().empty());
    EXPECT_NO_THROW(xfer.broadcast({})) << "broadcast of nothing to no device";
  }
  EXPECT_EQ(manager->pinned_pool().stats().allocations, 0u);
}

// A request so large that rounding it up to a size class would overflow std::size_t is refused as
// out_of_memory like any request above the limit, before any rounding.
TEST(CpuBadInput, PoolAcquireOfSizeMaxIsOutOfMemory) {
  PinnedPool pool(kPoolLimit);
  EXPECT_TRUE(test::throws_error([&] { (void)pool.acquire(std::numeric_limits<std::size_t>::max()); },
                                 Errc::out_of_memory, "pinned pool limit"));
  EXPECT_EQ(pool.stats().in_use, 0u);
  EXPECT_EQ(pool.stats().allocations, 0u);
}

// Without a meaningful limit the same requests are refused by size alone (the size class of anything above
// SIZE_MAX / 2 does not fit in std::size_t).
TEST(CpuBadInput, PoolWithoutALimitRefusesSizesBeyondAnySizeClass) {
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  PinnedPool pool(max);
  for (std::size_t bytes : {max, max - 1, max - 4096, max / 2 + 1}) {
    EXPECT_TRUE(test::throws_error([&] { (void)pool.acquire(bytes); }, Errc::out_of_memory,
                                   "beyond any size class"))
        << bytes;
  }
  EXPECT_EQ(pool.stats().in_use, 0u);
  EXPECT_EQ(pool.stats().allocations, 0u);
}

}  // namespace
}  // namespace gpuxfer
