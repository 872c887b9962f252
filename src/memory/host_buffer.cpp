#include <gpuxfer/host_buffer.hpp>

#include <utility>

#include "memory/pool_state.hpp"

namespace gpuxfer {

namespace detail {
HostBuffer host_buffer_view(std::shared_ptr<const void> keep, std::byte* data, std::size_t size) noexcept {
  return HostBuffer(std::move(keep), data, size);
}
}  // namespace detail

HostBuffer::~HostBuffer() { reset(); }

HostBuffer::HostBuffer(HostBuffer&& other) noexcept
    : pool_(std::move(other.pool_)),
      keep_(std::move(other.keep_)),
      data_(std::exchange(other.data_, nullptr)),
      block_bytes_(std::exchange(other.block_bytes_, 0)),
      size_(std::exchange(other.size_, 0)),
      node_(std::exchange(other.node_, -1)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    pool_ = std::move(other.pool_);
    keep_ = std::move(other.keep_);
    data_ = std::exchange(other.data_, nullptr);
    block_bytes_ = std::exchange(other.block_bytes_, 0);
    node_ = std::exchange(other.node_, -1);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void HostBuffer::reset() noexcept {
  if (pool_ && data_ != nullptr) pool_->give_back(data_, block_bytes_, node_);
  pool_.reset();
  keep_.reset();
  data_ = nullptr;
  block_bytes_ = 0;
  size_ = 0;
  node_ = -1;
}

}  // namespace gpuxfer
