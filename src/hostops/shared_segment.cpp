#include "hostops/shared_segment.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gpuxfer/error.hpp>

#include "bootstrap/secret.hpp"
#include "runtime/log.hpp"

namespace gpuxfer::detail {
namespace {

std::string errno_text(int err) {
  return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

[[noreturn]] void fail(int err, const std::string& what) {
  const bool no_room = err == ENOSPC || err == ENOMEM || err == EMFILE || err == ENFILE;
  std::string message = what + ": " + errno_text(err);
  if (err == ENOSPC)
    message += ": /dev/shm is full (df /dev/shm; in a container raise it, e.g. docker --shm-size)";
  throw Error(no_room ? Errc::out_of_memory : Errc::comm_error, message);
}

// Closes the descriptor on every path; the mapping stays valid without it.
struct Fd {
  int fd = -1;
  explicit Fd(int descriptor) noexcept : fd(descriptor) {}
  Fd(Fd&& other) noexcept : fd(std::exchange(other.fd, -1)) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&&) = delete;
  ~Fd() {
    if (fd >= 0) (void)::close(fd);
  }
};

std::byte* map(int fd, std::size_t offset, std::size_t length, const std::string& what) {
  void* ptr = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(offset));
  if (ptr == MAP_FAILED) fail(errno, what + ": mmap of " + std::to_string(length) + " bytes");
  return static_cast<std::byte*>(ptr);
}

// How many names in a row create_at_random_name tries: with 63 random bits, a second is already a sign
// of someone creating names on purpose.
constexpr int name_tries = 16;

// The existing segment @p name, read and write: a regular file of this user (not a link, nor a FIFO, nor
// another user's segment at a gpuxfer name).
Fd open_existing(const std::string& name, const std::string& what) {
  Fd fd{::shm_open(name.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK, 0600)};
  if (fd.fd < 0) fail(errno, what + ": shm_open (does the root see the same /dev/shm?)");
  struct stat info {};
  if (::fstat(fd.fd, &info) != 0) fail(errno, what + ": fstat");
  if (!S_ISREG(info.st_mode))
    throw Error(Errc::comm_error, what + ": not a shared segment (not a regular file)");
  if (info.st_uid != ::geteuid()) {
    throw Error(Errc::comm_error, what + " belongs to another user (uid " + std::to_string(info.st_uid) +
                                      "), not to the root's (uid " + std::to_string(::geteuid()) +
                                      "): another user made a segment at a gpuxfer name; not opened");
  }
  return fd;
}

std::size_t size_of(const Fd& fd, const std::string& what) {
  struct stat info {};
  if (::fstat(fd.fd, &info) != 0) fail(errno, what + ": fstat");
  return static_cast<std::size_t>(info.st_size);
}

// A creator holds an exclusive flock on its segment from shm_open to unlink; the kernel lets go of it when
// the process ends, however it ends. A gpuxfer segment of this user whose lock can be taken therefore has
// no live creator: it is what a rank killed (SIGTERM from a launcher, SIGKILL, the OOM killer) or ended by
// std::terminate left behind, and nothing would ever unlink it. Mode 0 marks a segment whose creator has
// not taken the lock yet (create() opens it so and sets 0600 once locked): left alone.
void remove_stale_segments() {
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return;
  std::size_t removed = 0;
  std::size_t bytes = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = std::string("/") + entry->d_name;
    if (name.rfind("/gpuxfer-", 0) != 0) continue;
    Fd fd{::shm_open(name.c_str(), O_RDWR | O_NOFOLLOW, 0)};
    if (fd.fd < 0) continue;
    struct stat info {};
    if (::fstat(fd.fd, &info) != 0 || info.st_uid != ::geteuid() || (info.st_mode & 0777) == 0) continue;
    if (::flock(fd.fd, LOCK_EX | LOCK_NB) != 0) continue;  // its creator lives
    if (::shm_unlink(name.c_str()) == 0) {
      ++removed;
      bytes += static_cast<std::size_t>(info.st_size);
    }
  }
  ::closedir(dir);
  if (removed != 0) {
    GPUXFER_LOG(info, "removed " + std::to_string(removed) + " shared segment(s) of " +
                          std::to_string(bytes) +
                          " bytes in /dev/shm whose creators had ended without removing them");
  }
}

}  // namespace

std::size_t page_size() noexcept {
  static const std::size_t page = [] {
    const long got = ::sysconf(_SC_PAGESIZE);
    return got > 0 ? static_cast<std::size_t>(got) : std::size_t{4096};
  }();
  return page;
}

std::size_t round_to_pages(std::size_t bytes) noexcept {
  const std::size_t page = page_size();
  return (bytes + page - 1) / page * page;
}

std::string shared_segment_name(std::uint64_t pid, std::uint64_t nonce, std::uint64_t id) {
  char hex[17] = {};
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(nonce));
  return "/gpuxfer-" + std::to_string(pid) + "-" + hex + "-" + std::to_string(id);
}

std::uint64_t random_segment_id() {
  const std::string bytes = random_bytes(sizeof(std::uint64_t));
  std::uint64_t id = 0;
  std::memcpy(&id, bytes.data(), sizeof(id));
  return id >> 1;
}

SharedSegment SharedSegment::create(const std::string& name, std::size_t bytes) {
  bool exists = false;
  SharedSegment segment = create_if_new(name, bytes, exists);
  if (exists) {
    fail(EEXIST, "the shared segment " + name + " of " + std::to_string(bytes) + " bytes: shm_open");
  }
  return segment;
}

NamedSegment SharedSegment::create_at_random_name(std::uint64_t pid, std::uint64_t nonce, std::size_t bytes,
                                                  const std::function<std::uint64_t()>& pick_id) {
  std::string taken;
  for (int attempt = 0; attempt < name_tries; ++attempt) {
    const std::uint64_t id = pick_id();
    const std::string name = shared_segment_name(pid, nonce, id);
    bool exists = false;
    SharedSegment segment = create_if_new(name, bytes, exists);
    if (!exists) return NamedSegment{id, std::move(segment)};
    GPUXFER_LOG(warn, "the shared segment name " + name +
                          " exists already (made by another process, by "
                          "chance or on purpose): trying another random name");
    taken = name;
  }
  throw Error(Errc::comm_error, "a shared segment of " + std::to_string(bytes) +
                                    " bytes: " + std::to_string(name_tries) +
                                    " random names in a row existed already (the "
                                    "last " +
                                    taken +
                                    "): some process of this host creates gpuxfer's names "
                                    "in /dev/shm (ls -l /dev/shm says whose)");
}

SharedSegment SharedSegment::create_if_new(const std::string& name, std::size_t bytes, bool& exists) {
  const std::string what = "the shared segment " + name + " of " + std::to_string(bytes) + " bytes";
  remove_stale_segments();
  // Mode 0 until locked: remove_stale_segments leaves it alone meanwhile. O_EXCL: never an existing file,
  // nor a link's target.
  Fd fd{::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0)};
  exists = fd.fd < 0 && errno == EEXIST;
  if (exists) return SharedSegment();
  if (fd.fd < 0) fail(errno, what + ": shm_open");
  SharedSegment segment;
  segment.name_ = name;
  segment.owner_ = true;  // from here the destructor unlinks it, whatever fails next
  segment.size_ = bytes;
  if (::flock(fd.fd, LOCK_EX | LOCK_NB) != 0) fail(errno, what + ": flock");
  if (::fchmod(fd.fd, 0600) != 0) fail(errno, what + ": fchmod");
  segment.lock_fd_ = std::exchange(fd.fd, -1);  // held, with the lock, until the name is unlinked
  const int locked = segment.lock_fd_;
  if (bytes == 0) return segment;
  const std::size_t length = round_to_pages(bytes);
  if (::ftruncate(locked, static_cast<off_t>(length)) != 0) fail(errno, what + ": ftruncate");
  // tmpfs allocates pages when they are touched; reserved now, a full /dev/shm is this error, not a
  // SIGBUS in whichever process touches the page first.
  const int reserved = ::posix_fallocate(locked, 0, static_cast<off_t>(length));
  if (reserved != 0 && reserved != EOPNOTSUPP && reserved != EINVAL)
    fail(reserved, what + ": posix_fallocate");
  segment.data_ = map(locked, 0, length, what);
  segment.mapped_ = length;
  return segment;
}

SharedSegment SharedSegment::open(const std::string& name, std::size_t offset, std::size_t bytes) {
  const std::string what = "bytes " + std::to_string(offset) + " to " + std::to_string(offset + bytes) +
                           " of the shared segment " + name;
  if (offset % page_size() != 0) {
    throw Error(Errc::invalid_argument, what + ": the offset is not a multiple of the page size (" +
                                            std::to_string(page_size()) + " bytes)");
  }
  const Fd fd = open_existing(name, what);
  const std::size_t size = size_of(fd, what);
  if (size < offset + bytes) {
    throw Error(Errc::comm_error, what + ": the segment holds only " + std::to_string(size) +
                                      " bytes (do the ranks agree on the sizes?)");
  }
  SharedSegment segment;
  segment.name_ = name;
  segment.size_ = bytes;
  if (bytes == 0) return segment;
  const std::size_t length = round_to_pages(bytes);
  // The last page may lie past the segment's end when the creator's size was not rounded; map what is there.
  const std::size_t available = size - offset;
  segment.mapped_ = length < available ? length : available;
  segment.data_ = map(fd.fd, offset, segment.mapped_, what);
  return segment;
}

SharedSegment SharedSegment::open(const std::string& name) {
  const std::string what = "the shared segment " + name;
  const Fd fd = open_existing(name, what);
  const std::size_t size = size_of(fd, what);
  SharedSegment segment;
  segment.name_ = name;
  segment.size_ = size;
  if (size == 0) return segment;
  segment.data_ = map(fd.fd, 0, segment.size_, what);
  segment.mapped_ = segment.size_;
  return segment;
}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
    size_ = std::exchange(other.size_, 0);
    name_ = std::exchange(other.name_, {});
    owner_ = std::exchange(other.owner_, false);
    lock_fd_ = std::exchange(other.lock_fd_, -1);
  }
  return *this;
}

void SharedSegment::reset() noexcept {
  if (data_ != nullptr) (void)::munmap(data_, mapped_);
  if (owner_ && !name_.empty()) (void)::shm_unlink(name_.c_str());
  if (lock_fd_ >= 0) (void)::close(lock_fd_);  // after the unlink: a locked name is never taken for stale
  lock_fd_ = -1;
  data_ = nullptr;
  mapped_ = 0;
  size_ = 0;
  name_.clear();
  owner_ = false;
}

}  // namespace gpuxfer::detail
