// Loaded with LD_PRELOAD into the ranks of a comm_probe job: in the rank that GPUXFER_TEST_PAGE_SIZE_RANK
// names (its GPUXFER_RANK, as `gpuxfer launch` sets it), sysconf(_SC_PAGESIZE) answers
// GPUXFER_TEST_PAGE_SIZE, as on a node whose kernel has pages of that size (an aarch64 node's 64 KiB beside
// an x86 node's 4 KiB). Every other call, and every other process, goes to libc.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace {

long faked_page() {
  static const long page = [] {
    const char* size = std::getenv("GPUXFER_TEST_PAGE_SIZE");
    const char* rank = std::getenv("GPUXFER_TEST_PAGE_SIZE_RANK");
    const char* mine = std::getenv("GPUXFER_RANK");
    if (size == nullptr || rank == nullptr || mine == nullptr || std::strcmp(rank, mine) != 0) return 0L;
    return std::atol(size);
  }();
  return page;
}

}  // namespace

extern "C" long sysconf(int name) {
  static const auto real = reinterpret_cast<long (*)(int)>(dlsym(RTLD_NEXT, "sysconf"));
  if (name == _SC_PAGESIZE) {
    if (const long page = faked_page(); page > 0) return page;
  }
  return real != nullptr ? real(name) : -1;
}
