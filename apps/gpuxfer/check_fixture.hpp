/// @file check_fixture.hpp
/// @brief What the cases of `gpuxfer check` share: registered buffers, producer streams, pattern seeds,
/// and the comparison of results against the patterns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gpuxfer/inter_gpu_transfer.hpp>
#include <gpuxfer/multi_gpu_manager.hpp>
#include <gpuxfer/testing/cuda_resources.hpp>
#include <gpuxfer/testing/pattern.hpp>

namespace gpuxfer::cli {

using testing::DeviceGuard;
using testing::DeviceMemory;
using testing::Stream;

/// Thrown by a case that cannot run on this machine; says why.
struct Skip {
  std::string why;
};

/// What the cases share: one registered buffer and one producer stream per device.
class Fixture {
 public:
  Fixture(std::shared_ptr<MultiGpuManager> manager, std::size_t bytes, std::uint64_t seed)
      : manager_(manager), transfer_(std::move(manager)), bytes_(bytes), seed_(seed) {
    for (const DeviceInfo& d : manager_->devices()) {
      buffers_.emplace_back(d.ordinal, bytes);
      streams_.emplace_back(d.ordinal);
    }
  }

  [[nodiscard]] MultiGpuManager& manager() const { return *manager_; }
  [[nodiscard]] InterGpuTransfer& transfer() { return transfer_; }
  [[nodiscard]] std::size_t n() const { return manager_->device_count(); }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }
  [[nodiscard]] int ordinal(std::size_t dev) const { return manager_->device(dev).ordinal; }

  /// Device @p dev's own data, what every source holds before an operation.
  [[nodiscard]] std::uint64_t base(std::size_t dev) const { return pattern::seed_for(run(), dev); }
  /// Poison for outputs: differs from every base pattern.
  [[nodiscard]] std::uint64_t poison(std::size_t dev) const { return pattern::seed_for(run() + 1, dev); }
  /// Host data written by copy_buffer and broadcast.
  [[nodiscard]] std::uint64_t host_seed() const { return pattern::seed_for(run() + 2, 0); }

  /// Writes pattern @p seed into @p dev's buffer on its producer stream and registers it with that stream.
  void fill(std::size_t dev, std::uint64_t seed) {
    DeviceGuard guard(ordinal(dev));
    pattern::fill_device(buffers_[dev].get(), bytes_, seed, 0, streams_[dev].get());
    transfer_.set_device_buffer(dev, buffers_[dev].get(), bytes_, streams_[dev].get());
  }
  /// Starts a case: new patterns (so that stale bytes of an earlier case, in a reused pinned block for
  /// example, never pass), written into every device's buffer.
  void fill_all_base() {
    ++round_;
    for (std::size_t dev = 0; dev < n(); ++dev) {
      fill(dev, base(dev));
    }
  }

  /// Writes pattern @p seed into device memory @p ptr of @p dev and waits for it.
  void fill_raw(std::size_t dev, void* ptr, std::size_t bytes, std::uint64_t seed) {
    DeviceGuard guard(ordinal(dev));
    pattern::fill_device(ptr, bytes, seed, 0, streams_[dev].get());
    streams_[dev].synchronize();
  }

  /// Bytes of device memory @p ptr on @p dev that differ from pattern @p seed.
  [[nodiscard]] std::size_t mismatches(std::size_t dev, const void* ptr, std::size_t bytes,
                                       std::uint64_t seed) {
    DeviceGuard guard(ordinal(dev));
    return pattern::count_mismatches_device(ptr, bytes, seed, 0, streams_[dev].get());
  }
  [[nodiscard]] std::size_t mismatches(std::size_t dev, std::uint64_t seed) {
    return mismatches(dev, buffers_[dev].get(), bytes_, seed);
  }

 private:
  /// The run number of the current case's patterns: base, poison and host data are run, run + 1, run + 2.
  [[nodiscard]] std::uint64_t run() const { return seed_ + 3 * round_; }

  std::shared_ptr<MultiGpuManager> manager_;
  InterGpuTransfer transfer_;
  std::size_t bytes_;
  std::uint64_t seed_;
  std::uint64_t round_ = 0;
  std::vector<DeviceMemory> buffers_;
  std::vector<Stream> streams_;
};

/// Collects what a case found wrong; empty means PASS.
class Findings {
 public:
  void add(const std::string& what) { text_ += (text_.empty() ? "" : "; ") + what; }
  void wrong_bytes(const std::string& where, std::size_t wrong, std::size_t of) {
    if (wrong != 0) {
      add(where + ": " + std::to_string(wrong) + " of " + std::to_string(of) + " bytes wrong");
    }
  }
  void host(const std::string& where, std::span<const std::byte> data, std::size_t expected_size,
            std::uint64_t seed, std::uint64_t offset = 0) {
    if (data.size() != expected_size) {
      add(where + ": " + std::to_string(data.size()) + " bytes, expected " + std::to_string(expected_size));
      return;
    }
    wrong_bytes(where, pattern::count_mismatches_host(data, seed, offset), data.size());
  }
  /// Every device's registered buffer holds pattern expected(dev).
  void devices(Fixture& f, const std::function<std::uint64_t(std::size_t)>& expected) {
    for (std::size_t dev = 0; dev < f.n(); ++dev) {
      wrong_bytes("device " + std::to_string(dev), f.mismatches(dev, expected(dev)), f.bytes());
    }
  }
  /// @p pieces are the registered buffers of the devices not skipped, ascending and back to back.
  void layout(const std::vector<GatherPiece>& pieces, const Fixture& f, std::size_t skip) {
    std::size_t k = 0;
    for (std::size_t dev = 0; dev < f.n(); ++dev) {
      if (dev == skip) {
        continue;
      }
      if (k >= pieces.size() || pieces[k].device != dev || pieces[k].offset != k * f.bytes() ||
          pieces[k].size != f.bytes()) {
        add("piece " + std::to_string(k) + " is not device " + std::to_string(dev) + " at offset " +
            std::to_string(k * f.bytes()) + " of " + std::to_string(f.bytes()) + " bytes");
        return;
      }
      ++k;
    }
    if (k != pieces.size()) {
      add(std::to_string(pieces.size()) + " pieces, expected " + std::to_string(k));
    }
  }
  [[nodiscard]] const std::string& text() const { return text_; }

 private:
  std::string text_;
};

}  // namespace gpuxfer::cli
