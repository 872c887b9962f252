// A POSIX shared-memory segment (shm_open + mmap) that the ranks of one node write into: the root creates
// it (and unlinks it when done), every other rank of its node maps a part of it or all of it. Move-only; the
// destructor unmaps (and unlinks, for the creator) on every path, and never throws. What a creator that
// died leaves in /dev/shm, the next segment created on the node removes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gpuxfer::detail {

/// The host's page size (sysconf), the granule of every part of a segment.
[[nodiscard]] std::size_t page_size() noexcept;

/// @p bytes rounded up to a multiple of page_size().
[[nodiscard]] std::size_t round_to_pages(std::size_t bytes) noexcept;

/// "/gpuxfer-<pid>-<nonce in hex>-<call>": unique per creating process, per communicator (a random nonce,
/// which also keeps processes of one pid in two pid namespaces apart) and per call, so that two gathers
/// (or two communicators) never meet in one segment.
[[nodiscard]] std::string shared_segment_name(std::uint64_t pid, std::uint64_t nonce, std::uint64_t call);

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
  /// Maps [offset, offset + bytes) of the existing segment @p name; @p offset is a multiple of page_size().
  /// @throws Error(Errc::invalid_argument) for an offset off a page; Error(Errc::comm_error) when the
  ///         segment is missing or smaller than offset + bytes
  [[nodiscard]] static SharedSegment open(const std::string& name, std::size_t offset, std::size_t bytes);
  /// Maps all of the existing segment @p name, its size as fstat says (what a rank caches to reuse for
  /// every later call that names the segment).
  /// @throws Error(Errc::comm_error) when the segment is missing
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
  std::byte* data_ = nullptr;
  std::size_t mapped_ = 0;
  std::size_t size_ = 0;
  std::string name_;
  bool owner_ = false;
  int lock_fd_ = -1;  // the creator's descriptor, holding the flock that marks the segment as live
};

}  // namespace gpuxfer::detail
