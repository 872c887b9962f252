// InterGpuTransfer's copies into one device: host bytes (copy_buffer) and another device's buffer
// (copy_device_buffer, over peer access or through the staged ring).
#include <gpuxfer/inter_gpu_transfer.hpp>

#include <string>

#include <nvtx3/nvtx3.hpp>

#include <gpuxfer/error.hpp>

#include "engine/device_copies.hpp"
#include "engine/ordering.hpp"
#include "engine/transfer_state.hpp"
#include "engine/uploads.hpp"
#include "memory/host_memory.hpp"
#include "runtime/drain.hpp"

namespace gpuxfer {
namespace {

void queue_copy_buffer(detail::TransferState& t, std::size_t src_device, std::size_t dst_device,
                       std::span<const std::byte> data, std::optional<cudaStream_t> caller) {
  detail::ManagerState& m = t.m;
  detail::check_index(m, src_device, "copy_buffer source device");
  detail::check_index(m, dst_device, "copy_buffer destination device");
  detail::DeviceRange dst = t.registry.snapshot().require(dst_device, "copy_buffer");
  detail::check_fits(m, data.size(), dst, "copy_buffer");
  if (!data.empty() && data.data() == nullptr) throw Error(Errc::invalid_argument, "copy_buffer: data is null");
  if (data.empty()) return;
  const bool pinned = detail::is_pinned_range(data.data(), data.size());
  detail::OperationOrder order(m, caller, "copy_buffer");
  if (!pinned) order.refuse_capture("the data is pageable memory, which host threads stage; use pinned memory");
  order.add(dst, detail::Access::write);
  order.begin();
  // Should ordering fail after the upload is queued, it finishes before the caller gets @p data back.
  detail::DrainOnError drain;
  drain.add(detail::streams_for(m, dst).h2d.get());
  const std::vector<detail::SharedEvent> ends =
      detail::upload_to_all(m, data, std::span(&dst, 1), detail::UploadMode::per_device, pinned);
  order.done(dst, ends);
  order.join();
  if (!caller) {
    detail::OperationState op("copy_buffer");
    for (const auto& e : ends) op.track(e, detail::device_name(m, dst_device));
    op.wait();
  }
}

std::unique_ptr<detail::OperationState> queue_copy_device_buffer(detail::TransferState& t, std::size_t src_device, std::size_t dst_device,
                                                                 CopyPath path, std::optional<cudaStream_t> caller) {
  detail::ManagerState& m = t.m;
  detail::check_index(m, src_device, "copy_device_buffer source device");
  detail::check_index(m, dst_device, "copy_device_buffer destination device");
  if (src_device == dst_device) {
    throw Error(Errc::invalid_argument, "copy_device_buffer: source and destination are both " +
                                            detail::device_name(m, src_device));
  }
  const detail::RegistrySnapshot snapshot = t.registry.snapshot();
  detail::DeviceRange src = snapshot.require(src_device, "copy_device_buffer source");
  detail::DeviceRange dst = snapshot.require(dst_device, "copy_device_buffer destination");
  detail::check_fits(m, src.size, dst, "copy_device_buffer");
  const bool peer = m.peer[src_device][dst_device] != 0;
  if (path == CopyPath::peer && !peer) {
    throw Error(Errc::unsupported, "copy_device_buffer: no peer access between " + detail::device_name(m, src_device) +
                                       " and " + detail::device_name(m, dst_device) +
                                       " (link " + std::string(to_string(m.links[src_device][dst_device])) +
                                       ", peer access " + (m.options.enable_peer_access ? "on" : "off") + ")");
  }
  const bool use_peer = path == CopyPath::peer || (path == CopyPath::automatic && peer);
  detail::OperationOrder order(m, caller, "copy_device_buffer");
  if (!use_peer) order.refuse_capture("the staged path leases its ring from the pinned pool; use CopyPath::peer");
  order.add(src, detail::Access::read);
  order.add(dst, detail::Access::write);
  order.begin();
  auto op = std::make_unique<detail::OperationState>("copy_device_buffer");
  // Should ordering fail after the copy is queued, it finishes before the caller gets the buffers back.
  detail::DrainOnError drain;
  drain.add(detail::streams_for(m, src).d2d.get());
  drain.add(detail::streams_for(m, src).d2h.get());
  drain.add(detail::streams_for(m, dst).h2d.get());
  detail::SharedEvent copied = use_peer ? detail::enqueue_peer_copy(m, src, dst, src_device)
                                        : detail::enqueue_staged_copy(m, src, dst, *op);
  order.done(src, {copied});
  order.done(dst, {copied});
  order.join();
  if (!order.capturing()) op->track(copied, detail::device_name(m, dst_device));
  return op;
}

}  // namespace

void InterGpuTransfer::copy_buffer(std::size_t src_device, std::size_t dst_device, std::span<const std::byte> data) {
  nvtx3::scoped_range range{"gpuxfer::copy_buffer"};
  queue_copy_buffer(*state_, src_device, dst_device, data, std::nullopt);
}

void InterGpuTransfer::copy_buffer_async(std::size_t src_device, std::size_t dst_device,
                                         std::span<const std::byte> data, cudaStream_t stream) {
  nvtx3::scoped_range range{"gpuxfer::copy_buffer_async"};
  queue_copy_buffer(*state_, src_device, dst_device, data, stream);
}

TransferHandle InterGpuTransfer::copy_device_buffer_async(std::size_t src_device, std::size_t dst_device, CopyPath path) {
  nvtx3::scoped_range range{"gpuxfer::copy_device_buffer"};
  return TransferHandle(queue_copy_device_buffer(*state_, src_device, dst_device, path, std::nullopt));
}

TransferHandle InterGpuTransfer::copy_device_buffer_async(std::size_t src_device, std::size_t dst_device,
                                                          cudaStream_t stream, CopyPath path) {
  nvtx3::scoped_range range{"gpuxfer::copy_device_buffer_async"};
  return TransferHandle(queue_copy_device_buffer(*state_, src_device, dst_device, path, stream));
}

void InterGpuTransfer::copy_device_buffer(std::size_t src_device, std::size_t dst_device, CopyPath path) {
  copy_device_buffer_async(src_device, dst_device, path).wait();
}

}  // namespace gpuxfer
