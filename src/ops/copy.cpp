// InterGpuTransfer's copies into one device: host bytes (copy_buffer) and another device's buffer
// (copy_device_buffer, over peer access or through the staged ring).
#include <gpuxfer/inter_gpu_transfer.hpp>

#include <string>

#include <nvtx3/nvtx3.hpp>

#include <gpuxfer/error.hpp>

#include "engine/device_copies.hpp"
#include "engine/transfer_state.hpp"
#include "engine/uploads.hpp"

namespace gpuxfer {

void InterGpuTransfer::copy_buffer(std::size_t src_device, std::size_t dst_device, std::span<const std::byte> data) {
  nvtx3::scoped_range range{"gpuxfer::copy_buffer"};
  detail::ManagerState& m = state_->m;
  detail::check_index(m, src_device, "copy_buffer source device");
  detail::check_index(m, dst_device, "copy_buffer destination device");
  const detail::DeviceRange dst = state_->registry.snapshot().require(dst_device, "copy_buffer");
  detail::check_fits(m, data.size(), dst, "copy_buffer");
  if (!data.empty() && data.data() == nullptr) throw Error(Errc::invalid_argument, "copy_buffer: data is null");
  detail::upload_to_all(m, data, std::span(&dst, 1), detail::UploadMode::per_device);
}

TransferHandle InterGpuTransfer::copy_device_buffer_async(std::size_t src_device, std::size_t dst_device, CopyPath path) {
  nvtx3::scoped_range range{"gpuxfer::copy_device_buffer"};
  detail::ManagerState& m = state_->m;
  detail::check_index(m, src_device, "copy_device_buffer source device");
  detail::check_index(m, dst_device, "copy_device_buffer destination device");
  if (src_device == dst_device) {
    throw Error(Errc::invalid_argument, "copy_device_buffer: source and destination are both " +
                                            detail::device_name(m, src_device));
  }
  const detail::RegistrySnapshot snapshot = state_->registry.snapshot();
  const detail::DeviceRange src = snapshot.require(src_device, "copy_device_buffer source");
  const detail::DeviceRange dst = snapshot.require(dst_device, "copy_device_buffer destination");
  detail::check_fits(m, src.size, dst, "copy_device_buffer");
  const bool peer = m.peer[src_device][dst_device] != 0;
  if (path == CopyPath::peer && !peer) {
    throw Error(Errc::unsupported, "copy_device_buffer: no peer access between " + detail::device_name(m, src_device) +
                                       " and " + detail::device_name(m, dst_device) +
                                       " (link " + std::string(to_string(m.links[src_device][dst_device])) +
                                       ", peer access " + (m.options.enable_peer_access ? "on" : "off") + ")");
  }
  auto op = std::make_unique<detail::OperationState>("copy_device_buffer");
  const bool use_peer = path == CopyPath::peer || (path == CopyPath::automatic && peer);
  detail::SharedEvent copied = use_peer ? detail::enqueue_peer_copy(m, src, dst, src_device)
                                        : detail::enqueue_staged_copy(m, src, dst, *op);
  op->track(copied, detail::device_name(m, dst_device));
  // Later operations on the destination wait for this copy.
  state_->registry.set_ready(dst_device, dst.ptr, copied);
  return TransferHandle(std::move(op));
}

void InterGpuTransfer::copy_device_buffer(std::size_t src_device, std::size_t dst_device, CopyPath path) {
  copy_device_buffer_async(src_device, dst_device, path).wait();
}

}  // namespace gpuxfer
