#include "bootstrap/wire.hpp"

#include <algorithm>

#include <unistd.h>

#include <gpuxfer/error.hpp>

namespace gpuxfer::detail {
namespace {

constexpr std::size_t hello_fixed = 4 + 2 + 4 + 4 + 4 + 1;  // magic, version, world, rank, local, host length
// Then the host name and, from version 2, a GPU length byte and the GPU id; from version 3, a job length
// byte and the job's name.
constexpr std::size_t reply_fixed = 4 + 1 + 4;              // magic, ok, payload length

void put(std::string& out, std::uint64_t value, int bytes) {
  for (int shift = (bytes - 1) * 8; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((value >> shift) & 0xff));
}

std::uint32_t get(const std::string& in, std::size_t offset, int bytes) {
  std::uint32_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value = (value << 8) | static_cast<unsigned char>(in[offset + static_cast<std::size_t>(i)]);
  return value;
}

}  // namespace

std::string Hello::describe() const {
  return "rank " + std::to_string(rank) + " (local rank " + std::to_string(local_rank) + " on " + host + ")";
}

std::string encode(const Hello& hello) {
  const std::string host = hello.host.substr(0, 255);
  std::string out;
  put(out, hello.magic, 4);
  put(out, hello.version, 2);
  put(out, hello.world_size, 4);
  put(out, hello.rank, 4);
  put(out, hello.local_rank, 4);
  put(out, host.size(), 1);
  out += host;
  if (hello.version < 2) return out;
  for (const std::string* text : {&hello.gpu, &hello.job}) {
    const std::string cut = text->substr(0, 255);
    put(out, cut.size(), 1);
    out += cut;
  }
  return out;
}

std::string encode(const Reply& reply) {
  std::string out;
  put(out, wire_magic, 4);
  put(out, reply.ok ? 1 : 0, 1);
  put(out, reply.payload.size(), 4);
  return out + reply.payload;
}

std::optional<Hello> decode_hello(const std::string& buffer) {
  if (buffer.size() < hello_fixed) return std::nullopt;
  const std::size_t host_bytes = get(buffer, hello_fixed - 1, 1);
  if (buffer.size() < hello_fixed + host_bytes) return std::nullopt;
  Hello hello;
  hello.magic = get(buffer, 0, 4);
  hello.version = static_cast<std::uint16_t>(get(buffer, 4, 2));
  hello.world_size = get(buffer, 6, 4);
  hello.rank = get(buffer, 10, 4);
  hello.local_rank = get(buffer, 14, 4);
  hello.host = buffer.substr(hello_fixed, host_bytes);
  // A peer of another version is refused by its version: what follows the host is not read.
  if (hello.magic != wire_magic || hello.version != wire_version) return hello;
  std::size_t at = hello_fixed + host_bytes;
  for (std::string* text : {&hello.gpu, &hello.job}) {
    if (buffer.size() < at + 1) return std::nullopt;
    const std::size_t bytes = get(buffer, at, 1);
    if (buffer.size() < at + 1 + bytes) return std::nullopt;
    *text = buffer.substr(at + 1, bytes);
    at += 1 + bytes;
  }
  return hello;
}

std::optional<Reply> decode_reply(const std::string& buffer) {
  if (buffer.size() < reply_fixed) return std::nullopt;
  if (get(buffer, 0, 4) != wire_magic) {
    throw Error(Errc::comm_error,
                "the rendezvous peer is not gpuxfer's rank 0 (wrong magic): check the port in "
                "GPUXFER_INIT or MASTER_PORT");
  }
  const std::size_t length = get(buffer, 5, 4);
  if (length > max_reply_payload) {
    throw Error(Errc::comm_error, "rank 0's answer claims " + std::to_string(length) +
                                      " bytes, over the limit of " + std::to_string(max_reply_payload));
  }
  if (buffer.size() < reply_fixed + length) return std::nullopt;
  return Reply{get(buffer, 4, 1) == 1, buffer.substr(reply_fixed, length)};
}

std::string local_host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return std::string(name);
}

}  // namespace gpuxfer::detail
