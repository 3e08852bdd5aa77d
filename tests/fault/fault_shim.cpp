// A fault injector at the system-call level, loaded with LD_PRELOAD into a program under test.
// It counts every call that changes the file system under one folder (creating or opening a
// file to write, write, fsync, close of a written file, rename, mkdir, unlink, rmdir,
// truncate) and makes the N-th one fail with EIO or kills the process (SIGKILL) just before
// it, so a test can prove that a fault at any step of a checkpoint commit leaves a run that
// resumes. Calls elsewhere (reading, the shared libraries, /proc) pass through uncounted.
//
//   TAPEGRAD_FAULT_DIR   the folder whose changes are counted (an absolute path)
//   TAPEGRAD_FAULT_AT    the step to fault, from 1; 0 or unset only counts
//   TAPEGRAD_FAULT_MODE  fail (the call returns -1, errno EIO) or kill
//   TAPEGRAD_FAULT_LOG   a file that receives one line per counted step: "N call path"
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

namespace {

constexpr int kMaxFd = 4096;
std::atomic<long> g_step{0};
bool g_tracked[kMaxFd];  // descriptors opened on a path under the folder
bool g_written[kMaxFd];  // ... and written to

template <class F>
F real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

const char* env(const char* name) {
  const char* v = getenv(name);
  return v && *v ? v : nullptr;
}

// Whether `path` (relative to dirfd) lies under TAPEGRAD_FAULT_DIR.
bool under(int dirfd, const char* path) {
  const char* dir = env("TAPEGRAD_FAULT_DIR");
  if (!dir || !path) return false;
  char full[8192];
  if (path[0] == '/') {
    snprintf(full, sizeof full, "%s", path);
  } else if (dirfd == AT_FDCWD) {
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return false;
    snprintf(full, sizeof full, "%s/%s", cwd, path);
  } else {
    char link[64], base[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
    const ssize_t n =
        real<ssize_t (*)(const char*, char*, size_t)>("readlink")(link, base, sizeof base - 1);
    if (n <= 0) return false;
    base[n] = 0;
    snprintf(full, sizeof full, "%s/%s", base, path);
  }
  const size_t len = strlen(dir);
  return strncmp(full, dir, len) == 0 && (full[len] == '/' || full[len] == 0);
}

void log_step(long n, const char* call, const char* what) {
  const char* log = env("TAPEGRAD_FAULT_LOG");
  if (!log) return;
  const int fd =
      real<int (*)(const char*, int, ...)>("open")(log, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) return;
  char line[8400];
  const int len = snprintf(line, sizeof line, "%ld %s %s\n", n, call, what);
  real<ssize_t (*)(int, const void*, size_t)>("write")(fd, line, static_cast<size_t>(len));
  real<int (*)(int)>("close")(fd);
}

// Counts one step; true when this one is to fail (errno is set). A kill does not return.
bool fault(const char* call, const char* what) {
  const long n = ++g_step;
  log_step(n, call, what);
  const char* at = env("TAPEGRAD_FAULT_AT");
  if (!at || atol(at) != n) return false;
  const char* mode = env("TAPEGRAD_FAULT_MODE");
  if (mode && strcmp(mode, "kill") == 0) raise(SIGKILL);
  errno = EIO;
  return true;
}

bool writes(int flags) { return (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) != 0; }

bool tracked(int fd) { return fd >= 0 && fd < kMaxFd && g_tracked[fd]; }

const char* fd_name(int fd) {
  static thread_local char name[64];
  snprintf(name, sizeof name, "fd %d", fd);
  return name;
}

int open_common(int dirfd, const char* path, int flags, mode_t mode) {
  const bool counted = under(dirfd, path);
  if (counted && writes(flags) && fault("open", path)) return -1;
  const int fd = real<int (*)(int, const char*, int, ...)>("openat")(dirfd, path, flags, mode);
  if (fd >= 0 && fd < kMaxFd) {
    g_tracked[fd] = counted;
    g_written[fd] = false;
  }
  return fd;
}

mode_t mode_of(int flags, va_list ap) {
  return (flags & (O_CREAT | O_TMPFILE)) ? static_cast<mode_t>(va_arg(ap, int)) : 0;
}

}  // namespace

extern "C" {

int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_of(flags, ap);
  va_end(ap);
  return open_common(AT_FDCWD, path, flags, mode);
}
int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_of(flags, ap);
  va_end(ap);
  return open_common(AT_FDCWD, path, flags, mode);
}
int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_of(flags, ap);
  va_end(ap);
  return open_common(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_of(flags, ap);
  va_end(ap);
  return open_common(dirfd, path, flags, mode);
}

ssize_t write(int fd, const void* buf, size_t n) {
  if (tracked(fd)) {
    if (fault("write", fd_name(fd))) return -1;
    g_written[fd] = true;
  }
  return real<ssize_t (*)(int, const void*, size_t)>("write")(fd, buf, n);
}

int fsync(int fd) {
  if (tracked(fd) && fault("fsync", fd_name(fd))) return -1;
  return real<int (*)(int)>("fsync")(fd);
}

int fdatasync(int fd) {
  if (tracked(fd) && fault("fdatasync", fd_name(fd))) return -1;
  return real<int (*)(int)>("fdatasync")(fd);
}

int close(int fd) {
  const bool counted = tracked(fd) && g_written[fd];
  if (fd >= 0 && fd < kMaxFd) g_tracked[fd] = g_written[fd] = false;
  const int rc = real<int (*)(int)>("close")(fd);
  // the descriptor is gone either way, as with a real close that reports EIO
  if (counted && fault("close", fd_name(fd))) return -1;
  return rc;
}

int ftruncate(int fd, off_t length) {
  if (tracked(fd) && fault("ftruncate", fd_name(fd))) return -1;
  return real<int (*)(int, off_t)>("ftruncate")(fd, length);
}

int truncate(const char* path, off_t length) {
  if (under(AT_FDCWD, path) && fault("truncate", path)) return -1;
  return real<int (*)(const char*, off_t)>("truncate")(path, length);
}

int rename(const char* from, const char* to) {
  if ((under(AT_FDCWD, from) || under(AT_FDCWD, to)) && fault("rename", to)) return -1;
  return real<int (*)(const char*, const char*)>("rename")(from, to);
}

int renameat(int fromfd, const char* from, int tofd, const char* to) {
  if ((under(fromfd, from) || under(tofd, to)) && fault("renameat", to)) return -1;
  return real<int (*)(int, const char*, int, const char*)>("renameat")(fromfd, from, tofd, to);
}

int renameat2(int fromfd, const char* from, int tofd, const char* to, unsigned flags) {
  if ((under(fromfd, from) || under(tofd, to)) && fault("renameat2", to)) return -1;
  return real<int (*)(int, const char*, int, const char*, unsigned)>("renameat2")(fromfd, from,
                                                                                  tofd, to, flags);
}

int mkdir(const char* path, mode_t mode) {
  if (under(AT_FDCWD, path) && fault("mkdir", path)) return -1;
  return real<int (*)(const char*, mode_t)>("mkdir")(path, mode);
}

int unlink(const char* path) {
  if (under(AT_FDCWD, path) && fault("unlink", path)) return -1;
  return real<int (*)(const char*)>("unlink")(path);
}

int unlinkat(int dirfd, const char* path, int flags) {
  if (under(dirfd, path) && fault("unlinkat", path)) return -1;
  return real<int (*)(int, const char*, int)>("unlinkat")(dirfd, path, flags);
}

int rmdir(const char* path) {
  if (under(AT_FDCWD, path) && fault("rmdir", path)) return -1;
  return real<int (*)(const char*)>("rmdir")(path);
}

int remove(const char* path) {
  if (under(AT_FDCWD, path) && fault("remove", path)) return -1;
  return real<int (*)(const char*)>("remove")(path);
}

}  // extern "C"
