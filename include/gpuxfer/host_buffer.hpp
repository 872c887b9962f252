/// @file host_buffer.hpp
/// @brief HostBuffer: a move-only lease of pooled pinned host memory.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace gpuxfer {

namespace detail {
struct PoolState;
}

/// A lease of pinned host memory from a PinnedPool. Move-only; the block goes back to its pool when the
/// HostBuffer is destroyed or reset. The pool outlives none of its leases' need: a HostBuffer keeps the
/// pool's state alive, so it may outlive the manager that made it.
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

  /// Gives the block back to its pool now; the buffer becomes empty.
  void reset() noexcept;

  /// Shrinks the payload size to @p bytes (never grows it; the block keeps its capacity).
  void shrink(std::size_t bytes) noexcept { size_ = bytes < size_ ? bytes : size_; }

 private:
  friend class PinnedPool;
  friend struct detail::PoolState;
  HostBuffer(std::shared_ptr<detail::PoolState> pool, std::byte* block, std::size_t block_bytes,
             std::size_t size, int node) noexcept
      : pool_(std::move(pool)), data_(block), block_bytes_(block_bytes), size_(size), node_(node) {}

  std::shared_ptr<detail::PoolState> pool_;
  std::byte* data_ = nullptr;
  std::size_t block_bytes_ = 0;
  std::size_t size_ = 0;
  int node_ = -1;  // the NUMA node the block was leased on, -1 for cudaHostAlloc's
};

}  // namespace gpuxfer
