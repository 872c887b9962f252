/// @file host_registration.hpp
/// @brief register_host: page-lock caller memory once, so that every operation DMAs straight to or from it.
#pragma once

#include <cstddef>
#include <span>

namespace gpuxfer {

/// Caller memory page-locked with cudaHostRegister (portable: every device can DMA it) for as long as the
/// registration lives. Move-only; the memory is unregistered when the registration is destroyed or reset.
/// Operations that take host memory (gather_into, gather_slices, copy_buffer, broadcast) find a
/// registration that covers their whole range and DMA straight to or from it, at the pinned ceilings,
/// with no staging and no host copy.
///
/// The caller keeps the memory mapped for the registration's lifetime, and destroys the registration only
/// when no operation on that memory is in flight (a blocking operation is done when it returns). See
/// docs/HOST_MEMORY.md.
class HostRegistration {
 public:
  /// A registration of nothing.
  HostRegistration() noexcept = default;
  ~HostRegistration();
  HostRegistration(HostRegistration&& other) noexcept;
  HostRegistration& operator=(HostRegistration&& other) noexcept;
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;

  /// First byte registered, or nullptr when empty.
  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  /// Bytes registered.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::span<std::byte> span() const noexcept { return {data_, size_}; }

  /// Unregisters the memory now; the registration becomes empty.
  void reset() noexcept;

 private:
  friend HostRegistration register_host(std::span<std::byte> memory);
  HostRegistration(std::byte* data, std::size_t size) noexcept : data_(data), size_(size) {}

  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

/// Page-locks @p memory (cudaHostRegister, portable) until the returned registration dies: far cheaper
/// than allocating pinned memory, and worth it for a buffer used more than once. An empty span gives an
/// empty registration.
/// @throws Error(Errc::invalid_argument) when @p memory is null but not empty, overlaps a live
///         registration, or is already page-locked by other means (cudaHostAlloc, cudaHostRegister)
/// @throws Error(Errc::no_device) without a usable CUDA driver; Error(Errc::out_of_memory) when the host
///         cannot lock that much; Error(Errc::cuda_error) for other CUDA failures
[[nodiscard]] HostRegistration register_host(std::span<std::byte> memory);

}  // namespace gpuxfer
