// Bad input on real devices, table-driven: every public function of InterGpuTransfer and MultiGpuManager
// against every bad input it can get (null, pageable and pinned host pointers, freed memory, sizes past
// an allocation, data larger than a destination, a device without a buffer, a buffer freed since it was
// registered, indices out of range, paths this machine cannot run, zero sizes that are refused) and, in
// the MultiGpu table, memory and streams of the wrong device. One row per (function, input): the Errc it
// must throw and the words its message must contain. A third table holds zero-size inputs that must be
// accepted. After every row: the registry is as before, every registered buffer holds its bytes, and
// the pinned pool's in-use, cached + pending and allocation counts are unchanged (the pool is warm, so
// an operation that leased and leaked, or allocated before checking its input, shows). The rows are in
// bad_input_*_rows.cpp, one file a concept; the zero-size ones are here.
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/bad_input.hpp"

namespace gpuxfer::test {
namespace {

// The rows every machine with one GPU or more can run.
std::vector<GpuRow> single_rows() {
  std::vector<GpuRow> rows;
  for (auto part : {registry_rows(), copy_rows(), gather_rows(), manager_rows()}) {
    for (GpuRow& row : part) rows.push_back(std::move(row));
  }
  return rows;
}

// Zero sizes that are allowed: nothing is written, nothing thrown, nothing changes.
std::vector<GpuRow> zero_rows() {
  std::vector<GpuRow> r;
  auto all_zero = [](GpuWorld& w) {
    for (std::size_t i = 0; i < w.count; ++i) w.xfer->set_device_buffer(i, w.buffer[i], 0);
  };
  r.push_back({"copy_buffer_empty_data", [](GpuWorld& w) { w.xfer->copy_buffer(0, 0, {}); }, std::nullopt});
  r.push_back({"copy_buffer_empty_pinned_data",
               [](GpuWorld& w) { w.xfer->copy_buffer(0, 0, w.pinned.first(0)); }, std::nullopt});
  for (const auto path : {HostBroadcastPath::automatic, HostBroadcastPath::per_device}) {
    r.push_back({"broadcast_empty_data_" + path_name(path),
                 [path](GpuWorld& w) { w.xfer->broadcast({}, path); }, std::nullopt});
  }
  r.push_back({"broadcast_from_device_of_an_empty_root",
               [](GpuWorld& w) { w.xfer->broadcast_from_device(0); },
               std::nullopt,
               {},
               [](GpuWorld& w) { w.xfer->set_device_buffer(0, w.buffer[0], 0); }});
  r.push_back(
      {"gather_slices_of_no_slices", [](GpuWorld& w) { (void)w.xfer->gather_slices({}, {}); }, std::nullopt});
  r.push_back({"gather_slices_of_empty_null_slices",
               [](GpuWorld& w) {
                 const DeviceSlice slices[] = {{0, nullptr, 0}, {w.last(), nullptr, 0}};
                 if (w.xfer->gather_slices(slices, {}) != 0)
                   throw std::runtime_error("gather_slices wrote bytes");
               },
               std::nullopt});
  r.push_back({"gather_into_empty_output_of_empty_buffers",
               [](GpuWorld& w) {
                 for (const GatherPiece& p : w.xfer->gather_into({})) {
                   if (p.size != 0) throw std::runtime_error("a non-empty piece");
                 }
               },
               std::nullopt,
               {},
               all_zero});
  r.push_back({"gather_to_device_capacity_zero_of_empty_buffers",
               [](GpuWorld& w) { (void)w.xfer->gather_to_device(0, w.output[0], 0); },
               std::nullopt,
               {},
               all_zero});
  r.push_back({"gather_all_of_empty_buffers",
               [](GpuWorld& w) {
                 for (const HostBuffer& b : w.xfer->gather_all()) {
                   if (!b.empty()) throw std::runtime_error("a non-empty result");
                 }
               },
               std::nullopt,
               {},
               all_zero});
  return r;
}

// --- the fixture ------------------------------------------------------------------------------------------

template <class Base>
class BadInputTest : public Base, public ::testing::WithParamInterface<GpuRow> {
 protected:
  [[nodiscard]] Options options() const override {
    Options opts = Base::options();
    if (this->GetParam().options) this->GetParam().options(opts);
    return opts;
  }

  void SetUp() override {
    Base::SetUp();
    if (this->IsSkipped()) return;
    GpuWorld& w = world_;
    w.manager = &this->manager();
    w.xfer = &this->xfer();
    w.count = this->device_count();
    for (std::size_t i = 0; i < w.count; ++i) {
      w.ordinal.push_back(this->ordinal(i));
      DeviceMemory& buffer = this->allocate(i, kAlloc);
      w.size.push_back(kRegistered + 4096 * i);
      fill_device(buffer.ordinal(), buffer.get(), w.size[i], this->seed(i));
      this->xfer().set_device_buffer(i, buffer.get(), w.size[i]);
      w.buffer.push_back(buffer.get());
      w.spare.push_back(this->allocate(i, kAlloc).get());
      w.output.push_back(this->allocate(i, kAlloc * w.count).get());
      streams_.push_back(std::make_unique<Stream>(this->ordinal(i)));
      w.stream.push_back(streams_.back()->get());
    }
    pinned_ = std::make_unique<PinnedMemory>(kMiB);
    w.pinned = pinned_->span();
    // A warm pool: an operation that leases and leaks, or allocates before checking, changes its counts.
    { const auto warm_up = this->xfer().gather_all(); }
    w.register_freed = [this](std::size_t device, std::size_t bytes) {
      DeviceMemory& stale = this->allocate(device, bytes);
      this->xfer().set_device_buffer(device, stale.get(), bytes);
      stale.free_now();
    };
    // Freed last: no later allocation of the test can reuse these addresses (register_freed frees what
    // it allocates, and no row uses both).
    for (std::size_t i = 0; i < w.count; ++i) {
      DeviceMemory& freed = this->allocate(i, kAlloc);
      w.freed.push_back(freed.get());
      freed.free_now();
    }
  }

  void check_row() {
    const GpuRow& row = this->GetParam();
    if (row.separate_gpus != nullptr) {
      GPUXFER_SKIP_ON_ONE_GPU(0, 1, row.separate_gpus);
    }
    GpuWorld& w = world_;
    if (row.setup) row.setup(w);
    const Registry registry = registry_of(this->xfer(), w.count);
    const PoolSnapshot pool(this->manager().pinned_pool().stats());

    EXPECT_TRUE(row_holds(row, w)) << row.name;

    EXPECT_TRUE(registry_unchanged(this->xfer(), registry));
    for (std::size_t i = 0; i < w.count; ++i) {
      // The buffers the fixture registered hold their bytes, whatever the row did to the registry.
      EXPECT_TRUE(device_matches(w.ordinal[i], w.buffer[i], w.size[i], this->seed(i), 0,
                                 "buffer of device " + std::to_string(i) + " after " + row.name));
    }
    EXPECT_EQ(PoolSnapshot(this->manager().pinned_pool().stats()), pool) << "the manager's pinned pool";
  }

  GpuWorld world_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::unique_ptr<PinnedMemory> pinned_;
};

using GpuBadInput = BadInputTest<GpuTest>;
using MultiGpuBadInput = BadInputTest<MultiGpuTest>;
using GpuZeroSizes = BadInputTest<GpuTest>;

TEST_P(GpuBadInput, IsRejectedAndChangesNothing) { check_row(); }
TEST_P(MultiGpuBadInput, IsRejectedAndChangesNothing) { check_row(); }
TEST_P(GpuZeroSizes, IsAcceptedAndChangesNothing) { check_row(); }

INSTANTIATE_TEST_SUITE_P(Rows, GpuBadInput, ::testing::ValuesIn(single_rows()), row_name<GpuWorld>);
INSTANTIATE_TEST_SUITE_P(Rows, MultiGpuBadInput, ::testing::ValuesIn(multi_rows()), row_name<GpuWorld>);
INSTANTIATE_TEST_SUITE_P(Rows, GpuZeroSizes, ::testing::ValuesIn(zero_rows()), row_name<GpuWorld>);

}  // namespace
}  // namespace gpuxfer::test
