// The TCP rendezvous's two messages, big-endian on the wire. A rank sends a Hello; rank 0 answers every
// rank with a Reply carrying either the blob or the error text that the rank then throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuxfer::detail {

inline constexpr std::uint32_t wire_magic = 0x47584652;  // "GXFR"
inline constexpr std::uint16_t wire_version = 3;
/// The largest blob or error text a Reply carries: an NCCL unique id is 128 bytes.
inline constexpr std::size_t max_reply_payload = std::size_t{1} << 20;

struct Hello {
  std::uint32_t magic = wire_magic;
  std::uint16_t version = wire_version;
  std::uint32_t world_size = 0;
  std::uint32_t rank = 0;
  std::uint32_t local_rank = 0;
  std::string host;  ///< the sender's host name, at most 255 bytes (longer is cut)
  std::string gpu;   ///< the GPU the sender drives (LaunchEnv::gpu), at most 255 bytes; empty when unknown
  std::string job;   ///< the sender's job (LaunchEnv::job), at most 255 bytes; empty when none is named

  /// "rank 2 (local rank 0 on node-a)".
  [[nodiscard]] std::string describe() const;
};

struct Reply {
  bool ok = false;
  std::string payload;  ///< the blob when ok, else the error text
};

[[nodiscard]] std::string encode(const Hello& hello);
[[nodiscard]] std::string encode(const Reply& reply);

/// A Hello once @p buffer holds one whole; nullopt while bytes are missing. Reads the magic and version
/// as they come: the caller checks them.
[[nodiscard]] std::optional<Hello> decode_hello(const std::string& buffer);

/// A Reply once @p buffer holds one whole; nullopt while bytes are missing.
/// @throws Error(Errc::comm_error) on a wrong magic or a payload over max_reply_payload
[[nodiscard]] std::optional<Reply> decode_reply(const std::string& buffer);

/// This machine's host name, for the Hello and for messages.
[[nodiscard]] std::string local_host_name();

}  // namespace gpuxfer::detail
