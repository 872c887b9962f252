// The job's secret and the HMAC that proves it: what lets rank 0 and the other ranks tell each other from
// any process that can reach the rendezvous (OpenSSL's libcrypto does the cryptography).
#pragma once

#include <cstddef>
#include <string>

#include <gpuxfer/options.hpp>

namespace gpuxfer::detail {

/// The fewest bytes a secret may have: 128 bits.
inline constexpr std::size_t min_secret_bytes = 16;
/// The bytes of a secret that `gpuxfer launch` makes: 256 bits.
inline constexpr std::size_t new_secret_bytes = 32;

/// The job's secret, as bytes: GPUXFER_SECRET (hex), else the hex in the file GPUXFER_SECRET_FILE names,
/// which must be a regular file of this user that neither group nor others may read; empty when neither
/// is set.
/// @throws Error(Errc::invalid_option) for both set, a value that is not hex of at least 128 bits, a
///         file that cannot be read, is not this user's or is readable by others, or a build without
///         libcrypto (authentication_available)
[[nodiscard]] std::string read_job_secret(const EnvLookup& lookup);

/// Whether this build can prove a secret (it was built with OpenSSL's libcrypto). Without it a secret
/// set in the environment is refused (read_job_secret) and `gpuxfer launch` hands its ranks none.
[[nodiscard]] bool authentication_available() noexcept;

/// @p count bytes from OpenSSL's generator (RAND_bytes; the kernel's getrandom without libcrypto).
/// @throws Error(Errc::comm_error) when it has no entropy to give
[[nodiscard]] std::string random_bytes(std::size_t count);

/// A fresh secret in hex, as GPUXFER_SECRET takes it.
[[nodiscard]] std::string new_secret_hex();

/// HMAC-SHA256 of @p data under @p key: 32 bytes.
[[nodiscard]] std::string hmac_sha256(const std::string& key, const std::string& data);

/// Whether two MACs are alike, in a time that does not depend on where they differ (CRYPTO_memcmp).
[[nodiscard]] bool same_mac(const std::string& a, const std::string& b);

/// Lower-case hex of @p bytes.
[[nodiscard]] std::string to_hex(const std::string& bytes);
/// @p hex as bytes into @p bytes; false (and @p bytes unspecified) for anything but pairs of hex digits.
[[nodiscard]] bool from_hex(const std::string& hex, std::string& bytes);

}  // namespace gpuxfer::detail
