// InterGpuTransfer: the registry, the copies and the broadcasts. Gathers are in gather.cpp.
#include <gpuxfer/inter_gpu_transfer.hpp>

#include <string>

#include <nvtx3/nvtx3.hpp>

#include <gpuxfer/error.hpp>

#include "cuda_check.hpp"
#include "transfer_engine.hpp"

namespace gpuxfer {
namespace {

// The registered range of @p device, re-checked; Errc::invalid_buffer naming @p op when there is none.
detail::DeviceRange registered(const detail::ManagerImpl& m, const std::optional<detail::Registration>& reg,
                               std::size_t device, const char* op) {
  if (!reg) {
    throw Error(Errc::invalid_buffer, std::string(op) + ": no buffer is registered on " + detail::device_name(m, device) +
                                          " (call set_device_buffer first)");
  }
  return detail::range_of(m, device, *reg);
}

void check_fits(const detail::ManagerImpl& m, std::size_t bytes, const detail::DeviceRange& dst, const char* op) {
  if (bytes > dst.size) {
    throw Error(Errc::invalid_argument, std::string(op) + ": " + std::to_string(bytes) +
                                            " bytes do not fit the buffer of " + std::to_string(dst.size) +
                                            " bytes registered on " + detail::device_name(m, dst.device));
  }
}

// Every device's registered range, each checked to hold @p bytes.
std::vector<detail::DeviceRange> all_targets(detail::TransferImpl& t, std::size_t bytes, const char* op) {
  const auto snapshot = t.registry.snapshot();
  std::vector<detail::DeviceRange> targets;
  for (std::size_t i = 0; i < snapshot.size(); ++i) {
    targets.push_back(registered(t.m, snapshot[i], i, op));
    check_fits(t.m, bytes, targets.back(), op);
  }
  return targets;
}

}  // namespace

InterGpuTransfer::InterGpuTransfer(std::shared_ptr<MultiGpuManager> manager) : manager_(std::move(manager)) {
  if (!manager_) throw Error(Errc::invalid_argument, "InterGpuTransfer needs a manager, got nullptr");
  impl_ = std::make_unique<detail::TransferImpl>(manager_->impl());
}

InterGpuTransfer::~InterGpuTransfer() = default;

const std::shared_ptr<MultiGpuManager>& InterGpuTransfer::manager() const noexcept { return manager_; }

void InterGpuTransfer::set_device_buffer(std::size_t device_idx, void* ptr, std::size_t size_bytes) {
  set_device_buffer(device_idx, ptr, size_bytes, cudaStreamLegacy);
}

void InterGpuTransfer::set_device_buffer(std::size_t device_idx, void* ptr, std::size_t size_bytes,
                                         cudaStream_t producer) {
  detail::ManagerImpl& m = impl_->m;
  detail::check_index(m, device_idx, "set_device_buffer device");
  detail::Registration reg;
  reg.allocation = detail::validate_device_range(m, device_idx, ptr, size_bytes, "set_device_buffer");
  reg.ptr = ptr;
  reg.size = size_bytes;
  detail::DeviceGuard guard(m.ordinal(device_idx));
  reg.ready = detail::make_event(m.ordinal(device_idx));
  GPUXFER_CUDA_TRY_CTX(cudaEventRecord(reg.ready->get(), producer),
                       "set_device_buffer: recording the producer stream's event on " +
                           detail::device_name(m, device_idx) + " (is the stream of another device?)");
  impl_->registry.set(device_idx, std::move(reg));
}

void InterGpuTransfer::clear_device_buffer(std::size_t device_idx) {
  detail::check_index(impl_->m, device_idx, "clear_device_buffer device");
  impl_->registry.clear(device_idx);
}

std::optional<RegisteredBuffer> InterGpuTransfer::device_buffer(std::size_t device_idx) const {
  detail::check_index(impl_->m, device_idx, "device_buffer device");
  const auto reg = impl_->registry.get(device_idx);
  if (!reg) return std::nullopt;
  return RegisteredBuffer{reg->ptr, reg->size};
}

void InterGpuTransfer::copy_buffer(std::size_t src_device, std::size_t dst_device, std::span<const std::byte> data) {
  nvtx3::scoped_range range{"gpuxfer::copy_buffer"};
  detail::ManagerImpl& m = impl_->m;
  detail::check_index(m, src_device, "copy_buffer source device");
  detail::check_index(m, dst_device, "copy_buffer destination device");
  const detail::DeviceRange dst = registered(m, impl_->registry.get(dst_device), dst_device, "copy_buffer");
  check_fits(m, data.size(), dst, "copy_buffer");
  if (!data.empty() && data.data() == nullptr) throw Error(Errc::invalid_argument, "copy_buffer: data is null");
  detail::upload_to_all(m, data, std::span(&dst, 1), detail::UploadMode::per_device);
}

TransferHandle InterGpuTransfer::copy_device_buffer_async(std::size_t src_device, std::size_t dst_device, CopyPath path) {
  nvtx3::scoped_range range{"gpuxfer::copy_device_buffer"};
  detail::ManagerImpl& m = impl_->m;
  detail::check_index(m, src_device, "copy_device_buffer source device");
  detail::check_index(m, dst_device, "copy_device_buffer destination device");
  if (src_device == dst_device) {
    throw Error(Errc::invalid_argument, "copy_device_buffer: source and destination are both " +
                                            detail::device_name(m, src_device));
  }
  const auto snapshot = impl_->registry.snapshot();
  const detail::DeviceRange src = registered(m, snapshot[src_device], src_device, "copy_device_buffer source");
  const detail::DeviceRange dst = registered(m, snapshot[dst_device], dst_device, "copy_device_buffer destination");
  check_fits(m, src.size, dst, "copy_device_buffer");
  const bool peer = m.peer[src_device][dst_device] != 0;
  if (path == CopyPath::peer && !peer) {
    throw Error(Errc::unsupported, "copy_device_buffer: no peer access between " + detail::device_name(m, src_device) +
                                       " and " + detail::device_name(m, dst_device) +
                                       " (link " + std::string(to_string(m.links[src_device][dst_device])) +
                                       ", peer access " + (m.options.enable_peer_access ? "on" : "off") + ")");
  }
  auto done = std::make_unique<detail::Completion>("copy_device_buffer");
  const bool use_peer = path == CopyPath::peer || (path == CopyPath::automatic && peer);
  detail::SharedEvent copied = use_peer ? detail::enqueue_peer_copy(m, src, dst, src_device)
                                        : detail::enqueue_staged_copy(m, src, dst, *done);
  done->track(copied, detail::device_name(m, dst_device));
  // Later operations on the destination wait for this copy.
  impl_->registry.set_ready(dst_device, dst.ptr, copied);
  return TransferHandle(std::move(done));
}

void InterGpuTransfer::copy_device_buffer(std::size_t src_device, std::size_t dst_device, CopyPath path) {
  copy_device_buffer_async(src_device, dst_device, path).wait();
}

void InterGpuTransfer::broadcast(std::span<const std::byte> data, HostBroadcastPath path) {
  nvtx3::scoped_range range{"gpuxfer::broadcast"};
  detail::ManagerImpl& m = impl_->m;
  const std::vector<detail::DeviceRange> targets = all_targets(*impl_, data.size(), "broadcast");
  if (!data.empty() && data.data() == nullptr) throw Error(Errc::invalid_argument, "broadcast: data is null");
  if (path == HostBroadcastPath::scatter_allgather && targets.size() > 1 && !m.all_peers) {
    throw Error(Errc::unsupported, "broadcast: scatter_allgather needs peer access between every pair of devices");
  }
  const bool scatter = path == HostBroadcastPath::scatter_allgather ||
                       (path == HostBroadcastPath::automatic && m.all_peers && targets.size() > 1);
  detail::upload_to_all(m, data, targets, scatter ? detail::UploadMode::scatter_allgather : detail::UploadMode::per_device);
}

}  // namespace gpuxfer
