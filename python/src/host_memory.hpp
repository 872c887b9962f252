// Host memory across the boundary: caller arrays in (buffer protocol or DLPack, no copy) and pinned
// HostBuffers out as numpy arrays that keep their block leased.
#pragma once

#include <cstddef>
#include <span>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <gpuxfer/host_buffer.hpp>

namespace gpuxfer::python {

namespace nb = nanobind;

/// Caller host memory seen as bytes. Holds the import alive; destroy it with the GIL held.
struct HostView {
  nb::ndarray<nb::ro> keep;  // the import (DLPack capsule or buffer view)
  std::byte* data = nullptr;
  std::size_t bytes = 0;

  [[nodiscard]] std::span<std::byte> span() const noexcept { return {data, bytes}; }
  [[nodiscard]] std::span<const std::byte> cspan() const noexcept { return {data, bytes}; }
};

/// A C-contiguous host array (numpy, a CPU tensor, bytes, bytearray, memoryview...) as bytes.
/// @throws nb::type_error when @p obj is not host memory, or not contiguous, or read-only while
///         @p writable
[[nodiscard]] HostView host_view(nb::handle obj, bool writable);

/// A 1-D uint8 numpy array over @p buffer's pinned bytes, owning the lease; None when empty.
[[nodiscard]] nb::object host_array(HostBuffer&& buffer);

}  // namespace gpuxfer::python
