// HostBuffers that view memory which is not a pool's block (a communicator's shared segment).
#pragma once

#include <cstddef>
#include <memory>

#include <gpuxfer/host_buffer.hpp>

namespace gpuxfer::detail {

/// A HostBuffer of @p size bytes at @p data that keeps @p keep (the memory's owner) alive until it is
/// destroyed, reset or moved over; @p data must stay valid (and page-locked, for a HostBuffer's callers
/// expect that) as long as @p keep lives. data, size, span, shrink and to_vector work as for a lease.
HostBuffer host_buffer_view(std::shared_ptr<const void> keep, std::byte* data, std::size_t size) noexcept;

}  // namespace gpuxfer::detail
