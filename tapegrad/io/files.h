// Files as a user trusts them: readers open only regular files of a bounded size (a FIFO,
// /dev/zero or a directory given as a data file is an error, not a hang; a stream a user pipes
// in, StreamFile, waits a bounded time for its writer), and writers replace a file atomically
// (a temporary in the same directory, written, synced, renamed over the target, the directory
// synced), so a crash or a full disk leaves the old file or the new one, never a mix. A writer
// never writes through a path it did not create: a target that is a symbolic link, a hard link (a
// second name of some other file), a FIFO or a device is refused. Errors are io::FileError and name
// the file.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <string_view>

#include "tapegrad/autograd/error.h"

// What every reader and writer of a file shares, and the safetensors format.
namespace tapegrad::io {

class FileError : public Error {
 public:
  using Error::Error;
};

// Text from a file, for an error message: at most 64 characters of it.
std::string clip(std::string text);

struct OpenedFile {
  std::ifstream stream;  // binary
  uint64_t size = 0;     // bytes
};

// Opens `path` for reading when it is a regular file of at most max_bytes; throws FileError
// ("PATH: not a regular file (a fifo)", "PATH: 5000000 bytes, over the limit of 4194304").
OpenedFile open_regular(const std::string& path, uint64_t max_bytes);
// The whole of such a file; FileError as open_regular's, or "PATH: read failed".
std::string read_regular(const std::string& path, uint64_t max_bytes);
// A regular file or a pipe (a FIFO, `<(cut -f2 test.tsv)`) read as a stream, as a reader of a
// user's stream takes it: a FIFO that no writer has written to or closed within `wait_ms` is a
// FileError, not a hang, and anything else (a directory, a device) is refused, naming the kind.
// What it reads is bounded by its reader (data::LineReader); a failed read throws FileError.
class StreamFile : public std::streambuf {
 public:
  explicit StreamFile(const std::string& path, int wait_ms = 10000);
  ~StreamFile() override;
  StreamFile(const StreamFile&) = delete;
  StreamFile& operator=(const StreamFile&) = delete;

 protected:
  int_type underflow() override;

 private:
  std::string path_;
  int fd_ = -1;
  char buffer_[1 << 16];
};

// Receives the bytes of a file being written, in order.
using Sink = std::function<void(const void* data, size_t n)>;

// Throws FileError unless `path` is missing or a regular file with one name: "PATH: is a
// symbolic link; refusing to write through it", "... has 2 names (a hard link) ...".
void check_writable(const std::string& path);

// Replaces `path` with what `body` writes, atomically (check_writable first). The temporary is
// "<dir>/.<name>.tmp.<pid>", created exclusively (a link left at that name is removed, never
// followed); on any failure it is removed and FileError (or body's own exception) propagates,
// leaving `path` as it was.
void write_atomic(const std::string& path, const std::function<void(const Sink&)>& body);
void write_atomic(const std::string& path, std::string_view contents);

// fsync on a directory, so that a rename or a new entry in it survives a power cut.
void sync_directory(const std::string& dir);
// fsync on a file another handle appends to (a log), so that what was flushed is on disk.
void sync_file(const std::string& path);

// A log that grows by appends (a run's loss.tsv), opened without following a link and refused
// unless it is a regular file with one name. Opening never blocks (a FIFO is refused, not
// waited on). Writes go straight to the file; sync() makes them durable.
class AppendFile {
 public:
  enum class Mode {
    Create,   // a new file; an existing one is an error
    Existing  // the file must exist
  };
  AppendFile(const std::string& path, Mode mode);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  void write(std::string_view text);
  void truncate(uint64_t size);  // cuts the file to `size` bytes, when it is longer
  void sync();
  uint64_t size() const { return size_; }  // bytes in the file
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Swaps two directories in one step (renameat2 with RENAME_EXCHANGE), so that a reader finds
// either the one or the other at each path, never nothing; both parents are synced. Where the
// file system cannot exchange, `b` is moved aside first, which leaves an instant with nothing
// at `b`.
void exchange_directories(const std::string& a, const std::string& b);

// True for the temporary names write_atomic uses, so a program can remove the ones a killed
// process left behind.
bool is_temporary_name(std::string_view file_name);

// JSON from a file is untrusted too. nlohmann's parser is iterative, but what reads the tree
// afterwards (dump(), comparisons) recurses, so a reader checks the nesting of the text first:
// the deepest nesting of arrays and objects in `text`, by a scan that stops once past `limit`.
// kMaxJsonDepth is the safetensors library's bound; tapegrad's own files nest 3 deep.
constexpr int kMaxJsonDepth = 128;
int json_depth(std::string_view text, int limit = kMaxJsonDepth);

}  // namespace tapegrad::io
