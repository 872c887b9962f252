#include "bootstrap/deadline.hpp"

#include <dlfcn.h>

#include <atomic>

namespace gpuxfer::detail {

namespace {

// Its address lies in the object (libgpuxfer.so, or whatever links this file in) that holds call_within's
// threads' code: a data address, never a PLT entry of another object.
const char anchor = 0;

}  // namespace

void keep_loaded() noexcept {
  static std::atomic<bool> kept{false};
  if (kept.exchange(true)) return;
  Dl_info info{};
  if (dladdr(&anchor, &info) == 0 || info.dli_fname == nullptr) return;
  // RTLD_NOLOAD: nothing new is loaded; RTLD_NODELETE marks the loaded object as never to be unloaded, the
  // handle's reference counting aside. The handle is never closed.
  (void)dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
}

}  // namespace gpuxfer::detail
