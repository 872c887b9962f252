/// @file host_buffer.hpp
/// @brief HostBuffer: move-only pinned host memory, a lease of a pool's block or a view of shared memory.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace gpuxfer {

class HostBuffer;

namespace detail {
struct PoolState;
HostBuffer host_buffer_view(std::shared_ptr<const void> keep, std::byte* data, std::size_t size) noexcept;
}  // namespace detail

/// Pinned (page-locked) host memory, move-only, of one of two kinds:
/// - a lease of a PinnedPool's block (what InterGpuTransfer returns): the block goes back to its pool when
///   the HostBuffer is destroyed or reset. A HostBuffer keeps the pool's state alive, so it may outlive the
///   manager that made it;
/// - a view of memory that belongs to something else (Communicator::gather_to_host's results are views of
///   a shared-memory segment of the communicator's): the HostBuffer keeps its owner alive, and lets go of
///   it when destroyed or reset. The owner may reuse the memory for a later operation only after every
///   view of it is gone; it may outlive the communicator that made it.
/// Both kinds stay page-locked as long as the HostBuffer holds them, and read and write the same way
/// (docs/HOST_MEMORY.md).
class HostBuffer {
 public:
  HostBuffer() noexcept = default;
  ~HostBuffer();
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  /// First byte, or nullptr when empty.
  [[nodiscard]] std::byte* data() noexcept { return data_; }
  [[nodiscard]] const std::byte* data() const noexcept { return data_; }
  /// Bytes of payload (the block behind it may be larger).
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::span<std::byte> span() noexcept { return {data_, size_}; }
  [[nodiscard]] std::span<const std::byte> span() const noexcept { return {data_, size_}; }
  /// A copy of the payload in ordinary memory.
  [[nodiscard]] std::vector<std::byte> to_vector() const { return {data_, data_ + size_}; }

  /// Gives the block back to its pool (or lets go of the memory it views) now; the buffer becomes empty.
  void reset() noexcept;

  /// Shrinks the payload size to @p bytes (never grows it; the block keeps its capacity).
  void shrink(std::size_t bytes) noexcept { size_ = bytes < size_ ? bytes : size_; }

 private:
  friend class PinnedPool;
  friend struct detail::PoolState;
  friend HostBuffer detail::host_buffer_view(std::shared_ptr<const void> keep, std::byte* data,
                                             std::size_t size) noexcept;
  HostBuffer(std::shared_ptr<detail::PoolState> pool, std::byte* block, std::size_t block_bytes,
             std::size_t size, int node) noexcept
      : pool_(std::move(pool)), data_(block), block_bytes_(block_bytes), size_(size), node_(node) {}

  HostBuffer(std::shared_ptr<const void> keep, std::byte* data, std::size_t size) noexcept
      : keep_(std::move(keep)), data_(data), size_(size) {}

  std::shared_ptr<detail::PoolState> pool_;  ///< a lease's pool, null for a view
  std::shared_ptr<const void> keep_;         ///< a view's owner, null for a lease
  std::byte* data_ = nullptr;
  std::size_t block_bytes_ = 0;
  std::size_t size_ = 0;
  int node_ = -1;  // the NUMA node the block was leased on, -1 for cudaHostAlloc's
};

}  // namespace gpuxfer
