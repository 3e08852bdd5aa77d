// tapegrad/io: writers refuse links and special files, never follow a planted temporary, and
// an append-only log neither follows a link nor waits on a FIFO; directories exchange whole.
// And data::LineReader, the bounded reader of streams that may never end.
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "tapegrad/data/data_error.h"
#include "tapegrad/data/text.h"
#include "tapegrad/io/files.h"

using namespace tapegrad;
namespace fs = std::filesystem;
using tapegrad::testing::TempDir;

namespace {

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("write_atomic refuses links and special files and never writes through them",
          "[io][errors]") {
  TempDir d;
  put(d / "mine", "mine");
  fs::create_symlink(d / "mine", d / "link");
  CHECK_THROWS_WITH(io::write_atomic(d / "link", "x"),
                    Catch::Contains("link: is a symbolic link; refusing to write through it"));
  fs::create_hard_link(d / "mine", d / "hard");
  CHECK_THROWS_WITH(io::write_atomic(d / "hard", "x"),
                    Catch::Contains("hard: has 2 names (a hard link)"));
  REQUIRE(::mkfifo((d / "fifo").c_str(), 0644) == 0);
  CHECK_THROWS_WITH(io::write_atomic(d / "fifo", "x"),
                    Catch::Contains("fifo: is a fifo, not a regular file"));
  fs::create_directory(d / "folder");
  CHECK_THROWS_WITH(io::write_atomic(d / "folder", "x"), Catch::Contains("is a directory"));
  CHECK(contents(d / "mine") == "mine");

  // a link planted at the temporary's name is removed, not followed
  fs::create_symlink(d / "mine", d / fmt::format(".new.tmp.{}", ::getpid()));
  io::write_atomic(d / "new", "new");
  CHECK(contents(d / "new") == "new");
  CHECK(contents(d / "mine") == "mine");
  CHECK(fs::is_regular_file(fs::symlink_status(d / "new")));
}

TEST_CASE("AppendFile opens only a plain file of its own, without blocking", "[io][errors]") {
  TempDir d;
  {
    io::AppendFile log(d / "log", io::AppendFile::Mode::Create);
    log.write("one\n");
    log.write("two\n");
    log.sync();
    CHECK(log.size() == 8);
  }
  CHECK_THROWS_WITH(io::AppendFile(d / "log", io::AppendFile::Mode::Create),
                    Catch::Contains("log: cannot open to append: File exists"));
  {
    io::AppendFile log(d / "log", io::AppendFile::Mode::Existing);
    CHECK(log.size() == 8);
    log.truncate(4);
    log.write("three\n");
  }
  CHECK(contents(d / "log") == "one\nthree\n");

  put(d / "mine", "mine");
  fs::create_symlink(d / "mine", d / "link");
  CHECK_THROWS_WITH(io::AppendFile(d / "link", io::AppendFile::Mode::Existing),
                    Catch::Contains("link: is a symbolic link; refusing to write through it"));
  fs::create_symlink(d / "nowhere", d / "dangling");
  CHECK_THROWS_WITH(io::AppendFile(d / "dangling", io::AppendFile::Mode::Create),
                    Catch::Contains("dangling: is a symbolic link"));
  CHECK_FALSE(fs::exists(d / "nowhere"));
  fs::create_hard_link(d / "mine", d / "hard");
  CHECK_THROWS_WITH(io::AppendFile(d / "hard", io::AppendFile::Mode::Existing),
                    Catch::Contains("hard: has 2 names"));
  REQUIRE(::mkfifo((d / "fifo").c_str(), 0644) == 0);
  // no reader: a blocking open would wait for ever; this one fails at once
  CHECK_THROWS_WITH(io::AppendFile(d / "fifo", io::AppendFile::Mode::Existing),
                    Catch::Contains("fifo: is a fifo, not a regular file"));
  CHECK(contents(d / "mine") == "mine");
}

TEST_CASE("exchange_directories swaps two folders whole", "[io]") {
  TempDir d;
  fs::create_directory(d / "a");
  fs::create_directory(d / "b");
  put(d / "a/x", "from a");
  put(d / "b/y", "from b");
  io::exchange_directories(d / "a", d / "b");
  CHECK(contents(d / "b/x") == "from a");
  CHECK(contents(d / "a/y") == "from b");
  CHECK_FALSE(fs::exists(d / "a/x"));
  CHECK_THROWS_WITH(io::exchange_directories(d / "a", d / "missing"),
                    Catch::Contains("missing: cannot exchange it with"));
}

TEST_CASE("LineReader stops at binary, endless or oversized input, naming the line",
          "[io][errors]") {
  std::istringstream text("one\r\ntwo\n\nlast");
  data::LineReader r(text, "stdin", 16, 1000);
  CHECK(r.next() == "one");
  CHECK(r.next() == "two");
  CHECK(r.next() == "");
  CHECK(r.next() == "last");
  CHECK(r.where() == "stdin:4");
  CHECK(r.next() == std::nullopt);

  std::istringstream nul(std::string("ok\nab\0cd\n", 9));
  data::LineReader binary(nul, "stdin", 16, 1000);
  CHECK(binary.next() == "ok");
  CHECK_THROWS_WITH(binary.next(),
                    "stdin:2: a NUL byte at byte 3 of the line: binary input, not text");

  std::istringstream exact("0123456789abcdef\n0123456789abcdefX\n");
  data::LineReader line(exact, "pipe", 16, 1000);
  CHECK(line.next() == "0123456789abcdef");  // exactly the limit
  CHECK_THROWS_WITH(line.next(), "pipe:2: a line longer than 16 bytes; stopping");

  std::istringstream many("aaaa\nbbbb\ncccc\n");
  data::LineReader total(many, "stdin", 16, 12);
  CHECK(total.next() == "aaaa");
  CHECK(total.next() == "bbbb");
  CHECK_THROWS_WITH(total.next(), "stdin:3: more than 12 bytes of input; stopping");
}

TEST_CASE("read_lines takes a file or a pipe and waits a bounded time for a FIFO's writer",
          "[io][errors]") {
  TempDir dir;
  const std::string fifo = dir / "fifo", folder = dir / "folder";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  fs::create_directory(folder);
  CHECK_THROWS_WITH(io::StreamFile(fifo, 100), fifo + ": a fifo nobody wrote to within 0.1 s");
  CHECK_THROWS_WITH(data::read_lines(folder, 16, 1000),
                    folder + ": not a regular file or a pipe (a directory)");
  CHECK_THROWS_WITH(data::read_lines("/dev/zero", 16, 1000),
                    "/dev/zero: not a regular file or a pipe (a character device)");
  put(dir / "lines", "a\nb\n");
  CHECK(data::read_lines(dir / "lines", 16, 1000) == std::vector<std::string>{"a", "b"});
  int fds[2];
  REQUIRE(::pipe(fds) == 0);  // a pipe with its writer, as <(...) gives one
  REQUIRE(::write(fds[1], "x\ny\n", 4) == 4);
  ::close(fds[1]);
  CHECK(data::read_lines(fmt::format("/dev/fd/{}", fds[0]), 16, 1000) ==
        std::vector<std::string>{"x", "y"});
  ::close(fds[0]);
}
