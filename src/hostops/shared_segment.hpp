// A POSIX shared-memory segment (shm_open + mmap) that the ranks of one node write into: the root creates
// it (and unlinks it when done), every other rank of its node maps a part of it or all of it. Move-only; the
// destructor unmaps (and unlinks, for the creator) on every path, and never throws. What a creator that
// died leaves in /dev/shm, the next segment created on the node removes. Names end in a random id, taken
// anew while a name exists, and a segment another user owns is never opened: another user of the host can
// neither predict the names nor stop a creation or pass its own memory off as the root's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace gpuxfer::detail {

/// The host's page size (sysconf), the granule of every part of a segment.
[[nodiscard]] std::size_t page_size() noexcept;

/// @p bytes rounded up to a multiple of page_size().
[[nodiscard]] std::size_t round_to_pages(std::size_t bytes) noexcept;

/// "/gpuxfer-<pid>-<nonce in hex>-<id>": unique per creating process, per communicator (a random nonce,
/// which also keeps processes of one pid in two pid namespaces apart) and per segment (a random id), so
/// that two gathers (or two communicators) never meet in one segment.
[[nodiscard]] std::string shared_segment_name(std::uint64_t pid, std::uint64_t nonce, std::uint64_t id);

/// 63 random bits (random_bytes: OpenSSL's generator, or getrandom): a segment's id, below 2^63 so that
/// id + 1 never wraps to 0.
/// @throws Error(Errc::comm_error) when no random bytes can be had
[[nodiscard]] std::uint64_t random_segment_id();

struct NamedSegment;

class SharedSegment {
 public:
  SharedSegment() noexcept = default;
  /// Creates @p name (exclusive, mode 0600: an existing segment of that name is an error, never reused)
  /// of @p bytes, reserves its room (posix_fallocate, so that a full /dev/shm is an error here and
  /// never a SIGBUS later) and maps all of it. The creator unlinks it on destruction, and holds a flock
  /// on it until then: first, the gpuxfer segments of this user whose creators have ended without
  /// unlinking them (killed, or ended by std::terminate), which nothing else would remove, are removed.
  /// @throws Error(Errc::out_of_memory) when /dev/shm has no room; Error(Errc::comm_error) otherwise
  [[nodiscard]] static SharedSegment create(const std::string& name, std::size_t bytes);
  /// As create, named shared_segment_name(@p pid, @p nonce, id) with an id from @p pick_id (random by
  /// default), another while the name exists: a name another process made first, by chance or by
  /// predicting it, cannot stop the creation.
  /// @throws as create; Error(Errc::comm_error) when 16 names in a row exist
  [[nodiscard]] static NamedSegment create_at_random_name(
      std::uint64_t pid, std::uint64_t nonce, std::size_t bytes,
      const std::function<std::uint64_t()>& pick_id = random_segment_id);
  /// Maps [offset, offset + bytes) of the existing segment @p name; @p offset is a multiple of page_size().
  /// Only a regular file of this process's user (the root of a node is of the same user as its ranks) is
  /// mapped.
  /// @throws Error(Errc::invalid_argument) for an offset off a page; Error(Errc::comm_error) when the
  ///         segment is missing, another user's, or smaller than offset + bytes
  [[nodiscard]] static SharedSegment open(const std::string& name, std::size_t offset, std::size_t bytes);
  /// Maps all of the existing segment @p name, its size as fstat says (what a rank caches to reuse for
  /// every later call that names the segment); this user's alone, as the other open.
  /// @throws Error(Errc::comm_error) when the segment is missing or another user's
  [[nodiscard]] static SharedSegment open(const std::string& name);

  ~SharedSegment() { reset(); }
  SharedSegment(SharedSegment&& other) noexcept { *this = std::move(other); }
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  /// The first mapped byte (nullptr for an empty segment).
  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  /// The bytes asked for (the mapping is rounded up to pages).
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// True for the creator, which unlinks the name.
  [[nodiscard]] bool owner() const noexcept { return owner_; }

  /// Unmaps, and for the creator unlinks the name; the segment becomes empty. Never throws.
  void reset() noexcept;

 private:
  /// create, or an empty segment when @p name exists already.
  [[nodiscard]] static SharedSegment create_if_new(const std::string& name, std::size_t bytes, bool& exists);

  std::byte* data_ = nullptr;
  std::size_t mapped_ = 0;
  std::size_t size_ = 0;
  std::string name_;
  bool owner_ = false;
  int lock_fd_ = -1;  // the creator's descriptor, holding the flock that marks the segment as live
};

/// A segment made by SharedSegment::create_at_random_name, and the id in its name.
struct NamedSegment {
  std::uint64_t id = 0;  ///< the last part of its name, which the other ranks are told
  SharedSegment segment;
};

}  // namespace gpuxfer::detail
