// copy_blocks: blocks between device memory and pinned host memory (and within a device), by index
// pairs, on every path; odd sizes and strides, 0 and 1 block; bad pairs and layouts refused with nothing
// written; pairs in device memory (the kernel's checks, graph capture); ordering with the stream's
// producers and later writers.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>

#include "gpu/fixture.hpp"

namespace gpuxfer::test {
namespace {

enum class Dir { d2h, h2d, d2d };

const char* dir_name(Dir d) { return d == Dir::d2h ? "d2h" : d == Dir::h2d ? "h2d" : "d2d"; }

// One side of a test: its memory (device or pinned host) and its layout.
struct SideMem {
  bool device = false;
  int ordinal = 0;
  DeviceMemory dev;
  PinnedMemory host;
  std::size_t bytes = 0;

  SideMem(bool on_device, int ord, std::size_t size) : device(on_device), ordinal(ord), bytes(size) {
    if (device) {
      dev = DeviceMemory(ord, size);
    } else {
      host = PinnedMemory(size);
    }
  }
  [[nodiscard]] std::byte* base() const { return device ? dev.get() : host.data(); }
  // The side's bytes as the host sees them now.
  [[nodiscard]] std::vector<std::byte> image() const {
    std::vector<std::byte> out(bytes);
    if (bytes == 0) return out;
    cuda_check(cudaMemcpy(out.data(), base(), bytes, cudaMemcpyDefault), "cudaMemcpy");
    return out;
  }
  void write(const std::vector<std::byte>& data) {
    cuda_check(cudaMemcpy(base(), data.data(), bytes, cudaMemcpyDefault), "cudaMemcpy");
  }
};

std::size_t extent(const BlockLayout& l, std::size_t block_bytes, std::size_t layers) {
  const std::size_t bs = l.block_stride != 0 ? l.block_stride : layers * block_bytes;
  const std::size_t ls = l.layer_stride != 0 ? l.layer_stride : block_bytes;
  return l.blocks == 0 ? 1 : (l.blocks - 1) * bs + (layers - 1) * ls + block_bytes;
}

std::size_t offset(const BlockLayout& l, std::size_t block_bytes, std::size_t layers, std::size_t block,
                   std::size_t layer) {
  const std::size_t bs = l.block_stride != 0 ? l.block_stride : layers * block_bytes;
  const std::size_t ls = l.layer_stride != 0 ? l.layer_stride : block_bytes;
  return block * bs + layer * ls;
}

// Random pairs: @p count distinct destination blocks, sources drawn at random (repeats allowed), or the
// identity run 0.. when @p sequential.
std::vector<std::int64_t> make_pairs(std::size_t count, std::size_t src_blocks, std::size_t dst_blocks,
                                     bool sequential, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> dsts(dst_blocks);
  std::iota(dsts.begin(), dsts.end(), 0);
  if (!sequential) std::shuffle(dsts.begin(), dsts.end(), rng);
  std::vector<std::int64_t> pairs;
  for (std::size_t k = 0; k < count; ++k) {
    const auto s = sequential ? static_cast<std::int64_t>(k) : static_cast<std::int64_t>(rng() % src_blocks);
    pairs.insert(pairs.end(), {s, dsts[k]});
  }
  return pairs;
}

class CopyBlocksTest : public GpuTest {
 protected:
  // A copy in direction @p dir with layouts @p src_layout / @p dst_layout (bases filled in here); the
  // source holds a pattern, the destination poison. Runs @p run and checks every byte of the destination:
  // each pair's pieces where it says, poison everywhere else.
  void check_copy(Dir dir, BlockLayout src_layout, BlockLayout dst_layout, std::size_t block_bytes,
                  std::size_t layers, const std::vector<std::int64_t>& pairs, BlockPath path,
                  const std::string& what) {
    SideMem src(dir != Dir::h2d, ordinal(0), extent(src_layout, block_bytes, layers));
    SideMem dst(dir != Dir::d2h, ordinal(0), extent(dst_layout, block_bytes, layers));
    const std::vector<std::byte> src_image = pattern_bytes(src.bytes, seed(0));
    src.write(src_image);
    std::vector<std::byte> expected(dst.bytes, kPoison);
    dst.write(expected);
    src_layout.base = src.base();
    dst_layout.base = dst.base();
    for (std::size_t k = 0; k < pairs.size() / 2; ++k) {
      for (std::size_t l = 0; l < layers; ++l) {
        std::memcpy(expected.data() + offset(dst_layout, block_bytes, layers, pairs[2 * k + 1], l),
                    src_image.data() + offset(src_layout, block_bytes, layers, pairs[2 * k], l), block_bytes);
      }
    }
    BlockCopy c{src_layout, dst_layout, pairs.data(), pairs.size() / 2, block_bytes, layers};
    c.path = path;
    const BlockPath taken = copy_blocks(c);
    if (path != BlockPath::automatic && !pairs.empty()) {
      EXPECT_EQ(taken, path) << what;
    }
    const std::vector<std::byte> got = dst.image();
    const auto bad = std::mismatch(got.begin(), got.end(), expected.begin());
    EXPECT_TRUE(bad.first == got.end()) << what << ": first wrong byte at destination offset "
                                        << (bad.first - got.begin()) << " of " << got.size();
  }
};

using PathParam = std::tuple<Dir, BlockPath>;

class CopyBlocksPaths : public CopyBlocksTest, public ::testing::WithParamInterface<PathParam> {};

TEST_P(CopyBlocksPaths, SizesCountsAndOrders) {
  const auto [dir, path] = GetParam();
  for (const std::size_t block_bytes : {std::size_t{1}, std::size_t{4096}, std::size_t{4097}, 64 * kKiB}) {
    for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{37}, std::size_t{300}}) {
      for (const bool sequential : {true, false}) {
        const std::size_t blocks = std::max<std::size_t>(count + 5, 1);
        const auto pairs = make_pairs(count, blocks, blocks, sequential, seed(0) + count + block_bytes);
        check_copy(dir, {nullptr, blocks}, {nullptr, blocks}, block_bytes, 1, pairs, path,
                   std::string(dir_name(dir)) + " " + to_string(path) + ", " + std::to_string(count) + " x " +
                       std::to_string(block_bytes) + (sequential ? " sequential" : " random"));
      }
    }
  }
}

// The kernel takes host pairs by value, in launches of a small table or of block_pairs_per_launch (2000)
// pairs: counts at each table's edge and over several launches, both ways, 3 layers.
TEST_F(CopyBlocksTest, KernelPairCountsAcrossLaunches) {
  for (const Dir dir : {Dir::d2h, Dir::h2d}) {
    for (const std::size_t count :
         {std::size_t{128}, std::size_t{129}, std::size_t{2000}, std::size_t{2001}, std::size_t{4129}}) {
      const auto pairs = make_pairs(count, count + 3, count + 7, false, seed(0) + count);
      check_copy(dir, {nullptr, count + 3}, {nullptr, count + 7}, 96, 3, pairs, BlockPath::kernel,
                 std::string(dir_name(dir)) + " kernel, " + std::to_string(count) + " pairs");
    }
  }
}

TEST_P(CopyBlocksPaths, LayersAndOddStrides) {
  const auto [dir, path] = GetParam();
  const std::size_t bb = 1000;  // not a multiple of 16: the kernel's byte loop
  const std::size_t blocks = 40;
  const auto pairs = make_pairs(25, blocks, blocks, false, seed(0));
  // Source packed [block][layer]; destination [layer][block], blocks 1003 bytes apart.
  check_copy(dir, {nullptr, blocks}, {nullptr, blocks, 1003, blocks * 1003}, bb, 3, pairs, path,
             std::string(dir_name(dir)) + " " + to_string(path) + ", 3 layers, odd strides");
  // Runs of consecutive blocks over strided rows (2D copies); aligned 4 KiB pieces 4 KiB + 16 apart.
  const auto seq = make_pairs(30, blocks, blocks, true, seed(1));
  check_copy(dir, {nullptr, blocks, 2 * 4096 + 16, 4096 + 16}, {nullptr, blocks, 4096, blocks * 4096}, 4096,
             2, seq, path, std::string(dir_name(dir)) + " " + to_string(path) + ", 2 layers, strided runs");
}

std::string path_param_name(const ::testing::TestParamInfo<PathParam>& info) {
  return std::string(dir_name(std::get<0>(info.param))) + "_" + to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(All, CopyBlocksPaths,
                         ::testing::Combine(::testing::Values(Dir::d2h, Dir::h2d, Dir::d2d),
                                            ::testing::Values(BlockPath::automatic, BlockPath::copy_engine,
                                                              BlockPath::batch, BlockPath::kernel)),
                         path_param_name);

// Bad host pairs and layouts: refused before anything is queued, the destination untouched.
TEST_F(CopyBlocksTest, BadPairsWriteNothing) {
  constexpr std::size_t blocks = 8, bb = 4096;
  PinnedMemory host(blocks * bb);
  DeviceMemory dev(ordinal(0), blocks * bb);
  fill_device(ordinal(0), dev.get(), blocks * bb, seed(0));
  std::memset(host.data(), static_cast<int>(kPoison), host.size());
  const auto attempt = [&](const std::vector<std::int64_t>& pairs, BlockPath path, BlockLayout dst) {
    dst.base = host.data();
    BlockCopy c{{dev.get(), blocks}, dst, pairs.data(), pairs.size() / 2, bb, 1};
    c.path = path;
    return [c] { (void)copy_blocks(c); };
  };
  for (const BlockPath path : {BlockPath::copy_engine, BlockPath::batch, BlockPath::kernel}) {
    EXPECT_TRUE(throws_error(attempt({0, 0, 1, 1, 2, 8}, path, {nullptr, blocks}), Errc::invalid_argument,
                             "pair 2", "out of range", "nothing was copied"));
    EXPECT_TRUE(throws_error(attempt({0, 0, 9, 1}, path, {nullptr, blocks}), Errc::invalid_argument, "pair 1",
                             "source"));
    EXPECT_TRUE(throws_error(attempt({0, 3, 1, 4, 2, 3}, path, {nullptr, blocks}), Errc::invalid_argument,
                             "pair 2", "earlier pair"));
    EXPECT_TRUE(
        throws_error(attempt({0, 0}, path, {nullptr, blocks, 2048}), Errc::invalid_argument, "overlap"));
    EXPECT_TRUE(throws_error(attempt({0, 0}, path, {nullptr, blocks + 1}), Errc::invalid_argument,
                             "not page-locked"));
  }
  cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  EXPECT_TRUE(host_is_poison(host.span(), "the destination after refused copies"));
}

TEST_F(CopyBlocksTest, PageableAndHostToHostRefused) {
  constexpr std::size_t bb = 4096;
  std::vector<std::byte> pageable(4 * bb);
  DeviceMemory dev(ordinal(0), 4 * bb);
  PinnedMemory pinned(4 * bb);
  const std::vector<std::int64_t> pairs{0, 0};
  BlockCopy c{{dev.get(), 4}, {pageable.data(), 4}, pairs.data(), 1, bb, 1};
  EXPECT_TRUE(throws_error([&] { (void)copy_blocks(c); }, Errc::invalid_argument, "destination",
                           "cudaHostAlloc", "register_host"));
  c.src.base = pinned.data();
  EXPECT_TRUE(throws_error([&] { (void)copy_blocks(c); }, Errc::unsupported, "host memory"));
}

// Pairs in device memory: the kernel reads them; one out of range is skipped and reported, the others copied.
TEST_F(CopyBlocksTest, DevicePairsOutOfRangeAreReported) {
  constexpr std::size_t blocks = 16, bb = 4096;
  DeviceMemory dev(ordinal(0), blocks * bb);
  PinnedMemory host(blocks * bb);
  fill_device(ordinal(0), dev.get(), blocks * bb, seed(0));
  std::memset(host.data(), static_cast<int>(kPoison), host.size());
  const std::vector<std::int64_t> pairs{3, 0, 99, 1, 5, 2};
  DeviceMemory dpairs(ordinal(0), pairs.size() * sizeof(std::int64_t));
  cuda_check(cudaMemcpy(dpairs.get(), pairs.data(), dpairs.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  BlockCopy c{{dev.get(), blocks},
              {host.data(), blocks},
              reinterpret_cast<const std::int64_t*>(dpairs.get()),
              3,
              bb,
              1};
  EXPECT_TRUE(throws_error([&] { (void)copy_blocks(c); }, Errc::invalid_argument, "out of range", "skipped"));
  EXPECT_TRUE(host_matches(host.span().subspan(0, bb), seed(0), 3 * bb, "block 0"));
  EXPECT_TRUE(host_is_poison(host.span().subspan(bb, bb), "block 1 (its pair out of range)"));
  EXPECT_TRUE(host_matches(host.span().subspan(2 * bb, bb), seed(0), 5 * bb, "block 2"));
  // The stream-ordered form stores the flag where the caller says.
  PinnedMemory flag(sizeof(std::uint32_t), cudaHostAllocMapped);
  *reinterpret_cast<std::uint32_t*>(flag.data()) = 0;
  c.error_flag = reinterpret_cast<std::uint32_t*>(flag.data());
  Stream stream(ordinal(0));
  EXPECT_EQ(copy_blocks_async(c, stream.get()), BlockPath::kernel);
  stream.synchronize();
  EXPECT_EQ(*reinterpret_cast<volatile std::uint32_t*>(flag.data()), 1u);
  c.path = BlockPath::copy_engine;
  EXPECT_TRUE(throws_error([&] { (void)copy_blocks(c); }, Errc::unsupported, "host memory"));
}

// A producer on the stream writes the source slowly; the copy queued after it must see its bytes, and a
// writer queued after the copy must not reach the copy's source first. At 64 KiB the batch is split over
// side streams, which must wait for the producer and be joined back before the writer.
TEST_F(CopyBlocksTest, OrderedWithProducersAndLaterWriters) {
  constexpr std::size_t blocks = 256;
  for (const std::size_t bb : {16 * kKiB, 64 * kKiB}) {
    DeviceMemory dev(ordinal(0), blocks * bb);
    PinnedMemory host(blocks * bb);
    const auto pairs = make_pairs(blocks, blocks, blocks, false, seed(0));
    Stream stream(ordinal(0));
    for (const BlockPath path : {BlockPath::copy_engine, BlockPath::batch, BlockPath::kernel}) {
      const std::string what = std::string(to_string(path)) + ", " + std::to_string(bb) + "-byte blocks";
      std::memset(host.data(), static_cast<int>(kPoison), host.size());
      poison_device(ordinal(0), dev.get(), dev.size());
      const DeviceGuard guard(ordinal(0));
      pattern::fill_device_slow(dev.get(), dev.size(), seed(0), 20'000'000, stream.get());
      BlockCopy c{{dev.get(), blocks}, {host.data(), blocks}, pairs.data(), blocks, bb, 1};
      c.path = path;
      EXPECT_EQ(copy_blocks_async(c, stream.get()), path);
      EXPECT_TRUE(still_running(ordinal(0), stream.get(), "after copy_blocks_async, " + what));
      pattern::fill_device(dev.get(), dev.size(), other_seed(0), 0, stream.get());  // the later writer
      stream.synchronize();
      for (std::size_t k = 0; k < blocks; ++k) {
        ASSERT_TRUE(host_matches(host.span().subspan(pairs[2 * k + 1] * bb, bb), seed(0), pairs[2 * k] * bb,
                                 what + ", pair " + std::to_string(k)));
      }
    }
  }
}

// Host to device with the batch split over the stream and 7 side streams (256 rows: parts of 4, 8, 16,
// then 45 or 46 rows), forced and as automatic takes it: a slow kernel on the stream writes the
// destination blocks first; every part of the copy must land after it, never under it, and a writer
// queued after the copy must come after every part.
TEST_F(CopyBlocksTest, SplitBatchToDeviceLandsAfterEarlierWriters) {
  constexpr std::size_t blocks = 256;
  for (const std::size_t bb : {32 * kKiB, 64 * kKiB}) {
    DeviceMemory dev(ordinal(0), blocks * bb);
    PinnedMemory host(blocks * bb);
    const auto pairs = make_pairs(blocks, blocks, blocks, false, seed(0));
    pattern::fill_host(host.span(), seed(0));
    Stream stream(ordinal(0));
    for (const BlockPath path : {BlockPath::batch, BlockPath::automatic}) {
      const std::string what =
          std::string(to_string(path)) + ", " + std::to_string(bb) + "-byte blocks, pair ";
      poison_device(ordinal(0), dev.get(), dev.size());
      const DeviceGuard guard(ordinal(0));
      // 100 ms: the call must return while it runs, also on a host that ctest -j4 keeps busy.
      pattern::fill_device_slow(dev.get(), dev.size(), other_seed(0), 100'000'000, stream.get());
      BlockCopy c{{host.data(), blocks}, {dev.get(), blocks}, pairs.data(), blocks, bb, 1};
      c.path = path;
      EXPECT_EQ(copy_blocks_async(c, stream.get()), BlockPath::batch);
      EXPECT_TRUE(still_running(ordinal(0), stream.get(), "after copy_blocks_async, " + what));
      // The later writer overwrites the last pair's destination block: it must land after the copy's.
      const std::size_t last = pairs[2 * (blocks - 1) + 1];
      pattern::fill_device(dev.get() + last * bb, bb, other_seed(0), 0, stream.get());
      stream.synchronize();
      for (std::size_t k = 0; k + 1 < blocks; ++k) {
        ASSERT_TRUE(device_matches(ordinal(0), dev.get() + pairs[2 * k + 1] * bb, bb, seed(0),
                                   pairs[2 * k] * bb, what + std::to_string(k)));
      }
      ASSERT_TRUE(device_matches(ordinal(0), dev.get() + last * bb, bb, other_seed(0), 0,
                                 what + "the later writer's"));
    }
  }
}

// The blocking form is ordered after the legacy default stream's work, as cudaMemcpy is.
TEST_F(CopyBlocksTest, BlockingFormWaitsForLegacyStream) {
  constexpr std::size_t blocks = 64, bb = 4096;
  DeviceMemory dev(ordinal(0), blocks * bb);
  PinnedMemory host(blocks * bb);
  const auto pairs = make_pairs(blocks, blocks, blocks, false, seed(0));
  const DeviceGuard guard(ordinal(0));
  pattern::fill_device_slow(dev.get(), dev.size(), seed(0), 20'000'000, cudaStreamLegacy);
  (void)copy_blocks({{dev.get(), blocks}, {host.data(), blocks}, pairs.data(), blocks, bb, 1});
  for (std::size_t k = 0; k < blocks; ++k) {
    ASSERT_TRUE(host_matches(host.span().subspan(pairs[2 * k + 1] * bb, bb), seed(0), pairs[2 * k] * bb,
                             "pair " + std::to_string(k)));
  }
}

// Captured with the pairs in device memory: each replay reads the pairs and the data of that moment.
TEST_F(CopyBlocksTest, GraphReplaysReadDevicePairs) {
  constexpr std::size_t blocks = 128, bb = 4096;
  DeviceMemory dev(ordinal(0), blocks * bb);
  PinnedMemory host(blocks * bb);
  DeviceMemory dpairs(ordinal(0), 2 * blocks * sizeof(std::int64_t));
  Stream stream(ordinal(0));
  const DeviceGuard guard(ordinal(0));
  BlockCopy c{{dev.get(), blocks},
              {host.data(), blocks},
              reinterpret_cast<const std::int64_t*>(dpairs.get()),
              blocks,
              bb,
              1};
  cudaGraph_t graph = nullptr;
  cuda_check(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal),
             "cudaStreamBeginCapture");
  const BlockPath taken = copy_blocks_async(c, stream.get());
  cuda_check(cudaStreamEndCapture(stream.get(), &graph), "cudaStreamEndCapture");
  EXPECT_EQ(taken, BlockPath::kernel);
  cudaGraphExec_t exec = nullptr;
  cuda_check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (std::uint64_t replay = 0; replay < 3; ++replay) {
    const auto pairs = make_pairs(blocks, blocks, blocks, false, seed(0) + replay);
    cuda_check(cudaMemcpy(dpairs.get(), pairs.data(), dpairs.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
    fill_device(ordinal(0), dev.get(), dev.size(), other_seed(replay));
    cuda_check(cudaGraphLaunch(exec, stream.get()), "cudaGraphLaunch");
    stream.synchronize();
    for (std::size_t k = 0; k < blocks; ++k) {
      ASSERT_TRUE(host_matches(host.span().subspan(pairs[2 * k + 1] * bb, bb), other_seed(replay),
                               pairs[2 * k] * bb, "replay " + std::to_string(replay)));
    }
  }
  cuda_check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  cuda_check(cudaGraphDestroy(graph), "cudaGraphDestroy");
}

}  // namespace
}  // namespace gpuxfer::test
