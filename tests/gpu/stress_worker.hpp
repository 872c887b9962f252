// The first phase of GpuStress (test_stress.cpp): one thread's engine, buffers, model of them, checks and
// run loop; the random operations it runs and checks are in stress_ops.cpp, run_worker in stress_worker.cpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gpu/stress_model.hpp"

namespace gpuxfer::test::stress {

// One thread of the first phase: its own engine, a buffer per device, a model of each.
class Worker {
 public:
  Worker(std::shared_ptr<MultiGpuManager> manager, const Config& config, std::size_t index,
         std::vector<int> ordinals, std::function<void(const std::string&)> record)
      : config_(config),
        index_(index),
        rng_(config.seed * 1000003 + index),
        manager_(std::move(manager)),
        engine_(manager_),
        ordinals_(std::move(ordinals)),
        count_(ordinals_.size()),
        host_(new std::byte[count_ * config.max_bytes + 2 * kSlack]),
        pinned_(count_ * config.max_bytes + 2 * kSlack),
        record_(std::move(record)) {
    for (std::size_t d = 0; d < count_; ++d) {
      memory_.push_back(std::make_unique<DeviceMemory>(ordinals_[d], config.max_bytes + kSlack));
      streams_.push_back(std::make_unique<Stream>(ordinals_[d]));
    }
    offset_.assign(count_, 0);
    content_.assign(count_, Content{});
    outputs_.resize(count_);
  }

  // Registers every device, then runs the random operations. Returns false after the first failure.
  bool run(std::atomic<std::size_t>& progress, std::atomic<const char*>& doing) {
    for (std::size_t d = 0; d < count_; ++d) {
      reregister(d);
      tally_.add("set_device_buffer", 0);
    }
    for (std::size_t op = 0; op < config_.ops; ++op) {
      const Kind kind = pick();
      doing = kNames[static_cast<int>(kind)];
      what_.clear();
      try {
        if (!perform(kind)) return false;
      } catch (const std::exception& e) {
        fail(std::string("threw: ") + e.what());
        return false;
      }
      ++progress;
    }
    doing = "done";
    return true;
  }

  const Tally& tally() const { return tally_; }

 private:
  enum class Kind {
    set_device_buffer,
    gather_blocking,
    gather_all,
    gather_into,
    gather_to_device,
    copy_buffer,
    copy_device_buffer,
    broadcast,
    broadcast_from_device,
    gather_slices,
  };
  static constexpr const char* kNames[] = {
      "set_device_buffer", "gather_blocking",    "gather_all", "gather_into",           "gather_to_device",
      "copy_buffer",       "copy_device_buffer", "broadcast",  "broadcast_from_device", "gather_slices"};

  Kind pick() {
    const bool two = count_ > 1;
    std::discrete_distribution<int> d({3, 2, 2, 3, 2, 2, two ? 3.0 : 0.0, 3, two ? 2.0 : 0.0, 2});
    return static_cast<Kind>(d(rng_));
  }

  std::size_t uniform(std::size_t lo, std::size_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng_);
  }
  bool coin() { return (rng_() & 1) != 0; }

  // Log-uniform in [1, max], and 0 one time in 32.
  std::size_t random_size(std::size_t max) {
    if (max == 0 || rng_() % 32 == 0) return 0;
    const double e =
        std::uniform_real_distribution<double>(0.0, std::log2(static_cast<double>(max) + 1.0))(rng_);
    return std::clamp<std::size_t>(static_cast<std::size_t>(std::exp2(e)), 1, max);
  }

  std::uint64_t fresh_seed() {
    return pattern::seed_for(config_.seed * 1000000007ULL + index_ * 10000000ULL + ++seeds_, 77);
  }

  std::byte* registered(std::size_t d) const { return memory_[d]->get() + offset_[d]; }
  cudaStream_t stream(std::size_t d) const { return streams_[d]->get(); }

  void fail(const std::string& why) {
    record_("thread " + std::to_string(index_) + " op " + std::to_string(ops_) + " " + what_ + ": " +
                 why);
  }

  // Checks that device @p d's registered buffer holds what the model says.
  bool check_device(std::size_t d, const std::string& what) {
    const DeviceGuard guard(ordinals_[d]);
    const std::size_t bad = content_[d].mismatches_device(registered(d), stream(d));
    if (bad == 0) return true;
    fail(what + ": " + std::to_string(bad) + " of " + std::to_string(content_[d].size()) +
         " bytes wrong on device " + std::to_string(d));
    return false;
  }

  bool check_host(std::span<const std::byte> got, const Content& want, const std::string& what) {
    const std::size_t bad = want.mismatches_host(got);
    if (bad == 0) return true;
    fail(what + ": " + std::to_string(bad) + " bytes wrong (got " + std::to_string(got.size()) +
         " bytes, want " + std::to_string(want.size()) + ")");
    return false;
  }

  bool check_poison(std::span<const std::byte> bytes, const std::string& what) {
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] != kPoison) {
        fail(what + ": byte " + std::to_string(i) + " past the output was written");
        return false;
      }
    }
    return true;
  }

  // A new registration of device @p d, its bytes written on the thread's own stream and not waited for:
  // the engine must order its copies after them.
  void reregister(std::size_t d, std::size_t size) {
    offset_[d] = uniform(0, kSlack - 1);
    const std::uint64_t seed = fresh_seed();
    {
      const DeviceGuard guard(ordinals_[d]);
      pattern::fill_device(registered(d), size, seed, 0, stream(d));
    }
    engine_.set_device_buffer(d, registered(d), size, stream(d));
    content_[d] = Content::pattern(size, seed);
  }
  void reregister(std::size_t d) { reregister(d, random_size(config_.max_bytes)); }

  // Shrinks device @p d's registration to its first @p size bytes (same pointer, same bytes).
  void shrink(std::size_t d, std::size_t size) {
    if (content_[d].size() <= size) return;
    engine_.set_device_buffer(d, registered(d), size, stream(d));
    content_[d] = content_[d].range(0, size);
  }

  std::span<std::byte> host_area(bool pinned, std::size_t bytes) {
    std::byte* base = pinned ? pinned_.span().data() : host_.get();
    return {base + uniform(0, 63), bytes};
  }

  bool perform(Kind kind) {
    ++ops_;
    // In the order of Kind.
    static constexpr bool (Worker::*kOps[])() = {
        &Worker::set_device_buffer, &Worker::gather_blocking,       &Worker::gather_all,
        &Worker::gather_into,       &Worker::gather_to_device,      &Worker::copy_buffer,
        &Worker::copy_device_buffer, &Worker::broadcast,            &Worker::broadcast_from_device,
        &Worker::gather_slices};
    static_assert(std::size(kOps) == std::size(kNames));
    return (this->*kOps[static_cast<int>(kind)])();
  }

  bool set_device_buffer() {
    reregister(uniform(0, count_ - 1));
    tally_.add("set_device_buffer", 0);
    return true;
  }
  bool gather_blocking() { return gather(false); }
  bool gather_all() { return gather(true); }

  bool gather(bool all);
  bool gather_into();
  bool gather_to_device();
  bool copy_buffer();
  bool copy_device_buffer();
  bool broadcast();
  bool broadcast_from_device();
  bool gather_slices();

  const Config& config_;
  std::size_t index_;
  std::mt19937_64 rng_;
  std::shared_ptr<MultiGpuManager> manager_;
  std::vector<std::unique_ptr<DeviceMemory>> memory_;   // the registered buffers, one per device
  std::vector<std::unique_ptr<DeviceMemory>> outputs_;  // gather_to_device outputs, made on first use
  InterGpuTransfer engine_;                             // destroyed before the memory it points to
  std::vector<int> ordinals_;
  std::size_t count_;
  std::unique_ptr<std::byte[]> host_;  // pageable
  PinnedMemory pinned_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::size_t> offset_;
  std::vector<Content> content_;
  std::function<void(const std::string&)> record_;
  Tally tally_;
  std::uint64_t seeds_ = 0;
  std::size_t ops_ = 0;
  std::string what_;
};

}  // namespace gpuxfer::test::stress
