// GpuStress's operations: each runs one public function of InterGpuTransfer with random sizes, offsets
// and paths, updates the worker's model of what every buffer holds, and checks every byte against it.
#include <array>
#include <cstring>
#include <optional>

#include "common/paths.hpp"
#include "gpu/stress_worker.hpp"

namespace gpuxfer::test::stress {

bool Worker::gather(bool all) {
  const std::size_t dst = uniform(0, count_ - 1);
  what_ = all ? std::string("gather_all") : "gather_blocking to " + std::to_string(dst);
  const std::vector<HostBuffer> out = all ? engine_.gather_all() : engine_.gather_blocking(dst);
  if (out.size() != (all ? count_ : count_ - 1)) {
    fail(std::to_string(out.size()) + " entries");
    return false;
  }
  std::size_t bytes = 0;
  for (std::size_t j = 0; j < out.size(); ++j) {
    const std::size_t src = all || j < dst ? j : j + 1;
    if (!check_host(out[j].span(), content_[src], "entry of device " + std::to_string(src))) return false;
    bytes += out[j].size();
  }
  tally_.add(all ? "gather_all" : "gather_blocking", bytes);
  return true;
}

bool Worker::gather_into() {
  const bool pinned = coin();
  std::optional<std::size_t> skip;
  if (uniform(0, 2) == 0) skip = uniform(0, count_ - 1);
  std::size_t total = 0;
  for (std::size_t d = 0; d < count_; ++d) total += skip == d ? 0 : content_[d].size();
  const std::size_t extra = uniform(0, 63);
  const std::span<std::byte> out = host_area(pinned, total + extra);
  what_ = std::string("gather_into ") + (pinned ? "pinned" : "pageable") + " of " + std::to_string(total) +
          " bytes";
  std::memset(out.data(), static_cast<int>(kPoison), out.size());
  const std::vector<GatherPiece> pieces = engine_.gather_into(out, skip);
  std::size_t offset = 0;
  for (const GatherPiece& p : pieces) {
    if (p.size == 0) continue;
    if (p.offset != offset || p.size != content_[p.device].size() || skip == p.device) {
      fail("piece of device " + std::to_string(p.device) + " at " + std::to_string(p.offset) + " of " +
           std::to_string(p.size) + " bytes, expected at " + std::to_string(offset));
      return false;
    }
    if (!check_host(out.subspan(p.offset, p.size), content_[p.device],
                    "device " + std::to_string(p.device))) {
      return false;
    }
    offset += p.size;
  }
  if (offset != total) {
    fail("pieces cover " + std::to_string(offset) + " bytes");
    return false;
  }
  if (!check_poison(out.subspan(total), "gather_into")) return false;
  tally_.add(std::string("gather_into/") + (pinned ? "pinned" : "pageable"), total);
  return true;
}

bool Worker::gather_to_device() {
  const std::size_t dst = uniform(0, count_ - 1);
  std::size_t total = 0;
  for (const Content& c : content_) total += c.size();
  if (!outputs_[dst])
    outputs_[dst] = std::make_unique<DeviceMemory>(ordinals_[dst], count_ * config_.max_bytes + 2 * kSlack);
  const std::size_t offset = uniform(0, kSlack - 1);
  const std::size_t capacity = total + uniform(0, kSlack - 1);
  std::byte* out = outputs_[dst]->get() + offset;
  what_ = "gather_to_device " + std::to_string(dst) + " of " + std::to_string(total) + " bytes";
  const DeviceGuard guard(ordinals_[dst]);
  cuda_check(cudaMemsetAsync(out, static_cast<int>(kPoison), capacity, stream(dst)), "cudaMemsetAsync");
  cuda_check(cudaStreamSynchronize(stream(dst)), "cudaStreamSynchronize");
  const std::vector<GatherPiece> pieces = engine_.gather_to_device(dst, out, capacity);
  std::size_t offset_now = 0;
  for (const GatherPiece& p : pieces) {
    if (p.size == 0) continue;
    if (p.offset != offset_now || p.size != content_[p.device].size()) {
      fail("piece of device " + std::to_string(p.device) + " at " + std::to_string(p.offset));
      return false;
    }
    const std::size_t bad = content_[p.device].mismatches_device(out + p.offset, stream(dst));
    if (bad != 0) {
      fail(std::to_string(bad) + " bytes of device " + std::to_string(p.device) + " wrong");
      return false;
    }
    offset_now += p.size;
  }
  std::vector<std::byte> tail(capacity - total);
  cuda_check(cudaMemcpy(tail.data(), out + total, tail.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  if (offset_now != total || !check_poison(tail, "gather_to_device")) return false;
  tally_.add("gather_to_device", total);
  return true;
}

bool Worker::copy_buffer() {
  const std::size_t src = uniform(0, count_ - 1);
  const std::size_t dst = uniform(0, count_ - 1);
  const bool pinned = coin();
  const std::size_t bytes = random_size(content_[dst].size());
  const std::uint64_t seed = fresh_seed();
  const std::span<std::byte> data = host_area(pinned, bytes);
  pattern::fill_host(data, seed);
  what_ = std::string("copy_buffer ") + (pinned ? "pinned " : "pageable ") + std::to_string(bytes) +
          " bytes " + std::to_string(src) + " -> " + std::to_string(dst);
  engine_.copy_buffer(src, dst, data);
  content_[dst].overwrite_prefix(Content::pattern(bytes, seed));
  if (!check_device(dst, "destination")) return false;
  tally_.add(std::string("copy_buffer/") + (pinned ? "pinned" : "pageable"), bytes);
  return true;
}

bool Worker::copy_device_buffer() {
  const std::size_t src = uniform(0, count_ - 1);
  const std::size_t dst = (src + uniform(1, count_ - 1)) % count_;
  CopyPath path = std::array{CopyPath::automatic, CopyPath::peer, CopyPath::staged}[uniform(0, 2)];
  if (path == CopyPath::peer && !manager_->peer_enabled(src, dst)) path = CopyPath::staged;
  const std::string name = path_name(path);
  shrink(src, content_[dst].size());
  what_ = std::string("copy_device_buffer ") + name + " of " + std::to_string(content_[src].size()) +
          " bytes " + std::to_string(src) + " -> " + std::to_string(dst);
  engine_.copy_device_buffer(src, dst, path);
  content_[dst].overwrite_prefix(content_[src]);
  if (!check_device(dst, "destination") || !check_device(src, "source")) return false;
  tally_.add(std::string("copy_device_buffer/") + name, content_[src].size());
  return true;
}

bool Worker::broadcast() {
  std::size_t room = config_.max_bytes;
  for (const Content& c : content_) room = std::min(room, c.size());
  const bool pinned = coin();
  HostBroadcastPath path = std::array{HostBroadcastPath::automatic, HostBroadcastPath::per_device,
                                      HostBroadcastPath::scatter_allgather}[uniform(0, 2)];
  if (path == HostBroadcastPath::scatter_allgather && count_ > 1 && !manager_->all_peers_enabled()) {
    path = HostBroadcastPath::per_device;
  }
  const std::string name = path_name(path);
  const std::size_t bytes = random_size(room);
  const std::uint64_t seed = fresh_seed();
  const std::span<std::byte> data = host_area(pinned, bytes);
  pattern::fill_host(data, seed);
  what_ = std::string("broadcast ") + name + (pinned ? " pinned " : " pageable ") + std::to_string(bytes) +
          " bytes";
  engine_.broadcast(data, path);
  for (std::size_t d = 0; d < count_; ++d) {
    content_[d].overwrite_prefix(Content::pattern(bytes, seed));
    if (!check_device(d, "device " + std::to_string(d))) return false;
  }
  tally_.add(std::string("broadcast/") + name, bytes * count_);
  return true;
}

bool Worker::broadcast_from_device() {
  const std::size_t root = uniform(0, count_ - 1);
  DeviceBroadcastPath path = std::array{DeviceBroadcastPath::automatic, DeviceBroadcastPath::peer,
                                        DeviceBroadcastPath::nccl}[uniform(0, 2)];
  if (path == DeviceBroadcastPath::nccl && !manager_->nccl_available()) path = DeviceBroadcastPath::peer;
  const std::string name = path_name(path);
  std::size_t room = content_[root].size();
  for (const Content& c : content_) room = std::min(room, c.size());
  shrink(root, room);
  what_ = std::string("broadcast_from_device ") + name + " root " + std::to_string(root) + " of " +
          std::to_string(room) + " bytes";
  engine_.broadcast_from_device(root, path);
  for (std::size_t d = 0; d < count_; ++d) {
    if (d != root) content_[d].overwrite_prefix(content_[root]);
    if (!check_device(d, "device " + std::to_string(d))) return false;
  }
  tally_.add(std::string("broadcast_from_device/") + name, room * (count_ - 1));
  return true;
}

bool Worker::gather_slices() {
  const bool pinned = coin();
  const std::size_t n = uniform(1, 32);
  std::vector<DeviceSlice> slices;
  std::vector<Content> expected;
  std::size_t total = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t d = uniform(0, count_ - 1);
    const std::size_t size = content_[d].size();
    const std::size_t begin = size == 0 ? 0 : uniform(0, size - 1);
    const std::size_t len = random_size(std::min<std::size_t>(size - begin, 256 * kKiB));
    slices.push_back({d, len == 0 ? nullptr : registered(d) + begin, len});
    expected.push_back(content_[d].range(begin, len));
    total += len;
  }
  // gather_slices waits for nothing registered: the fills on the thread's streams must be done.
  for (std::size_t d = 0; d < count_; ++d)
    cuda_check(cudaStreamSynchronize(stream(d)), "cudaStreamSynchronize");
  const std::size_t extra = uniform(0, 63);
  const std::span<std::byte> out = host_area(pinned, total + extra);
  std::memset(out.data(), static_cast<int>(kPoison), out.size());
  what_ = std::string("gather_slices ") + (pinned ? "pinned " : "pageable ") + std::to_string(n) +
          " slices, " + std::to_string(total) + " bytes";
  const std::size_t written = engine_.gather_slices(slices, out);
  if (written != total) {
    fail("returned " + std::to_string(written));
    return false;
  }
  std::size_t offset = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (!check_host(out.subspan(offset, slices[k].size), expected[k], "slice " + std::to_string(k)))
      return false;
    offset += slices[k].size;
  }
  if (!check_poison(out.subspan(total), "gather_slices")) return false;
  tally_.add(std::string("gather_slices/") + (pinned ? "pinned" : "pageable"), total);
  return true;
}

}  // namespace gpuxfer::test::stress
