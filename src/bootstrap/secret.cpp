#include "bootstrap/secret.hpp"

#include <cerrno>
#include <cstring>
#include <string_view>

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gpuxfer/error.hpp>

#include "bootstrap/socket.hpp"

#if GPUXFER_HAVE_LIBCRYPTO
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#endif

namespace gpuxfer::detail {
namespace {

// A secret file holds hex and perhaps a newline: anything larger is not one.
constexpr std::size_t max_secret_file_bytes = 4096;

[[noreturn]] void bad(const std::string& what, const std::string& why) {
  throw Error(Errc::invalid_option, what + ": " + why);
}

std::string trimmed(std::string_view text) {
  while (!text.empty() && std::strchr(" \t\r\n", text.back()) != nullptr) text.remove_suffix(1);
  while (!text.empty() && std::strchr(" \t\r\n", text.front()) != nullptr) text.remove_prefix(1);
  return std::string(text);
}

std::string decode_secret(const std::string& hex, const std::string& what) {
  std::string bytes;
  if (!from_hex(hex, bytes)) bad(what, "expected hex digits (for example from `openssl rand -hex 32`)");
  if (bytes.size() < min_secret_bytes) {
    bad(what, "too short: at least " + std::to_string(min_secret_bytes * 2) + " hex digits (128 bits), " +
                  std::to_string(hex.size()) + " given");
  }
  return bytes;
}

// The file's hex, once it is known to be this user's alone: O_NOFOLLOW and O_NONBLOCK, so that neither a
// link nor a FIFO put there by another is followed or waited on.
std::string read_secret_file(const std::string& path) {
  const std::string what = "GPUXFER_SECRET_FILE='" + path + "'";
  const UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (!fd) bad(what, std::string("cannot open it (") + std::strerror(errno) + ")");
  struct stat info {};
  if (fstat(fd.get(), &info) != 0) bad(what, std::string("cannot stat it (") + std::strerror(errno) + ")");
  if (!S_ISREG(info.st_mode)) bad(what, "not a regular file");
  if (info.st_uid != geteuid()) bad(what, "owned by another user: the secret file must be your own");
  if ((info.st_mode & 077) != 0) bad(what, "group or others may access it: chmod 600 it");
  if (static_cast<std::size_t>(info.st_size) > max_secret_file_bytes) bad(what, "too large for a secret");
  std::string text(max_secret_file_bytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) bad(what, std::string("cannot read it (") + std::strerror(errno) + ")");
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_secret_file_bytes) bad(what, "too large for a secret");
  text.resize(got);
  return decode_secret(trimmed(text), what);
}

}  // namespace

std::string read_job_secret(const EnvLookup& lookup) {
  const auto value = lookup("GPUXFER_SECRET");
  const auto file = lookup("GPUXFER_SECRET_FILE");
  if (value && file) {
    throw Error(Errc::invalid_option, "GPUXFER_SECRET and GPUXFER_SECRET_FILE are both set: set one");
  }
  if (!value && !file) return {};
  std::string secret = value ? decode_secret(trimmed(*value), "GPUXFER_SECRET") : read_secret_file(*file);
  if (!authentication_available()) {
    throw Error(Errc::invalid_option, std::string(value ? "GPUXFER_SECRET" : "GPUXFER_SECRET_FILE") +
                                          " is set, but this gpuxfer was built without OpenSSL's libcrypto "
                                          "(libssl-dev), which proves the secret: rebuild with it");
  }
  return secret;
}

bool authentication_available() noexcept { return GPUXFER_HAVE_LIBCRYPTO != 0; }

std::string random_bytes(std::size_t count) {
  std::string bytes(count, '\0');
#if GPUXFER_HAVE_LIBCRYPTO
  if (RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(count)) != 1) {
    throw Error(Errc::comm_error, "OpenSSL's RAND_bytes gave no random bytes (no entropy source?)");
  }
#else
  for (std::size_t got = 0; got < count;) {
    const ssize_t n = getrandom(bytes.data() + got, count - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(Errc::comm_error, std::string("getrandom failed: ") + std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
#endif
  return bytes;
}

std::string new_secret_hex() { return to_hex(random_bytes(new_secret_bytes)); }

std::string hmac_sha256(const std::string& key, const std::string& data) {
#if !GPUXFER_HAVE_LIBCRYPTO
  static_cast<void>(key);
  static_cast<void>(data);
  throw Error(Errc::unsupported, "built without OpenSSL's libcrypto (libssl-dev): no HMAC to prove a secret");
#else
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &length) == nullptr) {
    throw Error(Errc::comm_error, "OpenSSL's HMAC-SHA256 failed");
  }
  return std::string(reinterpret_cast<const char*>(mac), length);
#endif
}

bool same_mac(const std::string& a, const std::string& b) {
#if GPUXFER_HAVE_LIBCRYPTO
  return a.size() == b.size() && !a.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
#else
  static_cast<void>(a);
  static_cast<void>(b);
  return false;  // no MAC can have been made
#endif
}

std::string to_hex(const std::string& bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (const char byte : bytes) {
    const auto value = static_cast<unsigned char>(byte);
    hex += digits[value >> 4];
    hex += digits[value & 15];
  }
  return hex;
}

bool from_hex(const std::string& hex, std::string& bytes) {
  const auto nibble = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.empty() || hex.size() % 2 != 0) return false;
  bytes.clear();
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int high = nibble(hex[i]);
    const int low = nibble(hex[i + 1]);
    if (high < 0 || low < 0) return false;
    bytes += static_cast<char>(high * 16 + low);
  }
  return true;
}

}  // namespace gpuxfer::detail
