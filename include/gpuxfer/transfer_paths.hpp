/// @file transfer_paths.hpp
/// @brief The paths an operation can take, for callers that want to choose one rather than let gpuxfer.
#pragma once

namespace gpuxfer {

/// Path of a device-to-device copy.
enum class CopyPath {
  automatic,  ///< peer when peer access is enabled between the two devices, else staged
  peer,       ///< cudaMemcpyPeerAsync over NVLink/PCIe; Errc::unsupported without peer access
  staged,     ///< chunked pipeline through pooled pinned host memory (D2H of chunk k+1 while H2D of chunk k)
};

/// Path of a broadcast from host memory to every device.
enum class HostBroadcastPath {
  automatic,          ///< scatter_allgather when every pair of devices has peer access and there are 2+, else per_device
  per_device,         ///< every device reads the whole buffer over its own host link, all at once
  scatter_allgather,  ///< each device loads a share over its own link and forwards it to the others over peer links, pipelined
};

/// Path of a broadcast from one device's buffer to every other device.
enum class DeviceBroadcastPath {
  automatic,  ///< peer for two devices with peer access between them (one direct copy); else nccl when
              ///< available, else peer
  nccl,       ///< ncclBroadcast on the manager's cached communicators; Errc::unsupported without NCCL
  peer,       ///< peer copies (host-staged where a pair has no peer access)
};

}  // namespace gpuxfer
