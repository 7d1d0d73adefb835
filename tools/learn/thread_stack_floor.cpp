// Debian's civetweb (under prometheus-cpp's pull exposer, `--metrics`) asks
// for 100 KiB thread stacks. glibc carves a thread's static TLS out of its
// stack, and LibTorch's libraries (OpenBLAS, glog, torch) need more static
// TLS than that, so in abg-learn every civetweb thread failed to start
// (pthread_create: EINVAL, "Cannot create threads"). This definition takes
// the place of libc's for the whole process (abg-learn exports it: CMakeLists.txt) and raises any explicit stack
// size to at least `floor`; threads that keep the default size are untouched.
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cstddef>

namespace {

constexpr std::size_t floor = std::size_t{1} << 20;

using setter = int (*)(pthread_attr_t*, std::size_t);

setter libc_setter() {
  static const setter real = reinterpret_cast<setter>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  return real;
}

} // namespace

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, std::size_t size) noexcept {
  return libc_setter()(attr, std::max(size, floor));
}
