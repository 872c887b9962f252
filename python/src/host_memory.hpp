// Host memory across the boundary: caller arrays in (buffer protocol or DLPack, no copy). Gathered
// HostBuffers go out through pinned_block.hpp.
#pragma once

#include <cstddef>
#include <span>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

namespace gpuxfer::python {

namespace nb = nanobind;

/// Caller host memory seen as bytes. Holds the import alive; destroy it with the GIL held.
struct HostView {
  nb::ndarray<nb::ro> keep;  // the import (DLPack capsule or buffer view)
  std::byte* data = nullptr;
  std::size_t bytes = 0;

  [[nodiscard]] std::span<std::byte> span() const noexcept { return {data, bytes}; }
  [[nodiscard]] std::span<const std::byte> cspan() const noexcept { return {data, bytes}; }
  /// The import as a Python object (a capsule sharing it), for what must keep the memory where it is
  /// beyond this view: while a buffer-protocol export lives, a resizable object (bytearray,
  /// array.array) refuses to resize (BufferError) rather than move its bytes under a registration or a
  /// DMA still queued. Call with the GIL held.
  [[nodiscard]] nb::object exported() const;
};

/// A C-contiguous host array (numpy, a CPU tensor, bytes, bytearray, memoryview...) as bytes.
/// @throws nb::python_error (gpuxfer.InvalidHostArrayError: an InvalidArgumentError and a TypeError)
///         when @p obj is not host memory, or not contiguous, or read-only while @p writable
[[nodiscard]] HostView host_view(nb::handle obj, bool writable);

}  // namespace gpuxfer::python
