// Regular-file opening with size bounds, a user's stream read with a bounded wait, atomic
// replacement (temporary, fsync, rename, fsync of the folder), the append-only log, the
// directory exchange, syncing, and the JSON nesting scan.
#include "tapegrad/io/files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tapegrad::io {

std::string clip(std::string text) {
  if (text.size() > 64) text = text.substr(0, 60) + " ...";
  return text;
}

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw FileError(fmt::format("{}: {}", path, what));
}

std::string errno_text() { return std::strerror(errno); }

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a fifo";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a plain file";
}

constexpr std::string_view kTmpInfix = ".tmp.";

}  // namespace

OpenedFile open_regular(const std::string& path, uint64_t max_bytes) {
  // stat follows symlinks: a link to a regular file is fine, a link to a fifo is not
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(path, fmt::format("cannot open: {}", errno_text()));
  if (!S_ISREG(st.st_mode)) fail(path, fmt::format("not a regular file ({})", kind_of(st.st_mode)));
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) fail(path, fmt::format("{} bytes, over the limit of {}", size, max_bytes));
  OpenedFile f;
  f.stream.open(path, std::ios::binary);
  if (!f.stream) fail(path, "cannot open");
  f.size = size;
  return f;
}

std::string read_regular(const std::string& path, uint64_t max_bytes) {
  OpenedFile f = open_regular(path, max_bytes);
  std::string text(f.size, '\0');
  f.stream.read(text.data(), static_cast<std::streamsize>(f.size));
  if (!f.stream) fail(path, "read failed");
  return text;
}

StreamFile::StreamFile(const std::string& path, int wait_ms) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) fail(path, fmt::format("cannot open: {}", errno_text()));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))) {
    const std::string what = fmt::format("not a regular file or a pipe ({})", kind_of(st.st_mode));
    ::close(fd_);
    fail(path, what);
  }
  if (S_ISFIFO(st.st_mode)) {  // a writer has `wait_ms` to write or close; then reads block
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    int ready = 0;
    do {
      ready = ::poll(&p, 1, wait_ms);
    } while (ready < 0 && errno == EINTR);
    if (ready == 0) {
      ::close(fd_);
      fail(path, fmt::format("a fifo nobody wrote to within {} s", wait_ms / 1000.0));
    }
  }
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  setg(buffer_, buffer_, buffer_);
}

StreamFile::~StreamFile() { ::close(fd_); }

StreamFile::int_type StreamFile::underflow() {
  ssize_t n = 0;
  do {
    n = ::read(fd_, buffer_, sizeof buffer_);
  } while (n < 0 && errno == EINTR);
  if (n < 0) fail(path_, fmt::format("read failed: {}", errno_text()));
  if (n == 0) return traits_type::eof();
  setg(buffer_, buffer_, buffer_ + n);
  return traits_type::to_int_type(buffer_[0]);
}

namespace {
void sync(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, fmt::format("cannot open to sync: {}", errno_text()));
  const int rc = ::fsync(fd);
  const std::string why = errno_text();
  ::close(fd);
  if (rc != 0) fail(path, fmt::format("fsync failed: {}", why));
}
}  // namespace

void sync_directory(const std::string& dir) { sync(dir.empty() ? "." : dir, O_DIRECTORY); }
void sync_file(const std::string& path) { sync(path, 0); }

bool is_temporary_name(std::string_view name) {
  return name.size() > 1 && name[0] == '.' && name.find(kTmpInfix) != std::string_view::npos;
}

namespace {
// Why a file with this status is not one to write to, or "" for a regular file with one name.
std::string refusal(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return "is a symbolic link; refusing to write through it";
  if (!S_ISREG(st.st_mode))
    return fmt::format("is {}, not a regular file; refusing to write to it", kind_of(st.st_mode));
  if (st.st_nlink > 1) {
    return fmt::format(
        "has {} names (a hard link); refusing to write to it, which would change "
        "the file behind the other names too",
        st.st_nlink);
  }
  return "";
}
}  // namespace

void check_writable(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    fail(path, fmt::format("cannot inspect: {}", errno_text()));
  }
  if (const std::string why = refusal(st); !why.empty()) fail(path, why);
}

namespace {
// Writes all n bytes to fd, or throws FileError naming path.
void write_all(int fd, const std::string& path, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail(path, fmt::format("write failed: {}", w < 0 ? errno_text() : "no progress"));
    p += w;
    n -= static_cast<size_t>(w);
  }
}
}  // namespace

void write_atomic(const std::string& path, const std::function<void(const Sink&)>& body) {
  check_writable(path);
  const fs::path target(path);
  const std::string dir = target.parent_path().string();
  const std::string tmp = (target.parent_path() / fmt::format(".{}{}{}", target.filename().string(),
                                                              kTmpInfix, ::getpid()))
                              .string();
  ::unlink(tmp.c_str());  // a leftover of an earlier process with this pid; a link is not followed
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) fail(tmp, fmt::format("cannot create: {}", errno_text()));
  const Sink sink = [&](const void* data, size_t n) { write_all(fd, path, data, n); };
  try {
    body(sink);
    if (::fsync(fd) != 0) fail(path, fmt::format("fsync failed: {}", errno_text()));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    fail(path, fmt::format("close failed: {}", why));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    fail(path, fmt::format("cannot replace it: {}", why));
  }
  sync_directory(dir);
}

AppendFile::AppendFile(const std::string& path, Mode mode) : path_(path) {
  const int create = mode == Mode::Create ? O_CREAT | O_EXCL : 0;
  // O_NONBLOCK: opening a FIFO for writing would otherwise wait for a reader
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | create,
               0644);
  if (fd_ < 0) {
    const std::string why = errno_text();
    check_writable(path);  // names a link or a special file
    fail(path, fmt::format("cannot open to append: {}", why));
  }
  struct stat st {};
  try {
    if (::fstat(fd_, &st) != 0) fail(path, fmt::format("cannot inspect: {}", errno_text()));
    if (const std::string why = refusal(st); !why.empty()) fail(path, why);
    if (::fcntl(fd_, F_SETFL, O_APPEND) != 0) fail(path, fmt::format("fcntl: {}", errno_text()));
    size_ = static_cast<uint64_t>(st.st_size);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

AppendFile::~AppendFile() { ::close(fd_); }

void AppendFile::write(std::string_view text) {
  write_all(fd_, path_, text.data(), text.size());
  size_ += text.size();
}

void AppendFile::truncate(uint64_t size) {
  if (size >= size_) return;
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0)
    fail(path_, fmt::format("cannot truncate: {}", errno_text()));
  size_ = size;
}

void AppendFile::sync() {
  if (::fsync(fd_) != 0) fail(path_, fmt::format("fsync failed: {}", errno_text()));
}

void exchange_directories(const std::string& a, const std::string& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
      fail(b, fmt::format("cannot exchange it with {}: {}", a, errno_text()));
    const std::string aside = b + fmt::format("{}{}", kTmpInfix, ::getpid());
    if (::rename(b.c_str(), aside.c_str()) != 0)
      fail(b, fmt::format("cannot move it aside: {}", errno_text()));
    if (::rename(a.c_str(), b.c_str()) != 0) {
      const std::string why = errno_text();
      ::rename(aside.c_str(), b.c_str());  // b back in its place
      fail(b, fmt::format("cannot put {} in its place: {}", a, why));
    }
    if (::rename(aside.c_str(), a.c_str()) != 0)
      fail(a, fmt::format("cannot put {} in its place: {}", aside, errno_text()));
  }
  sync_directory(fs::path(a).parent_path().string());
  sync_directory(fs::path(b).parent_path().string());
}

int json_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) break;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

void write_atomic(const std::string& path, std::string_view contents) {
  write_atomic(path, [&](const Sink& sink) { sink(contents.data(), contents.size()); });
}

}  // namespace tapegrad::io
