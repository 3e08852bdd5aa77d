// Text helpers shared by the readers: UTF-8 validation, splitting into characters, and
// bounded line reads.
#include "tapegrad/data/text.h"

#include <fmt/core.h>

#include <fstream>
#include <iostream>

#include "tapegrad/data/data_error.h"

namespace tapegrad::data {

namespace {
// Length of the UTF-8 sequence starting with byte b, or 0 for a byte that cannot start one.
size_t sequence_length(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}
}  // namespace

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    const size_t n = sequence_length(b0);
    if (n == 0 || i + n > text.size()) return i;
    uint32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (b & 0x3F);
    }
    // overlong forms, surrogates and code points past U+10FFFF
    const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
    if (overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return i;
    i += n;
  }
  return std::nullopt;
}

std::vector<std::string> split_chars(std::string_view text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = std::max<size_t>(1, sequence_length(static_cast<unsigned char>(text[i])));
    out.emplace_back(text.substr(i, n));
    i += n;
  }
  return out;
}

std::optional<size_t> read_line(std::istream& in, std::string& line, size_t max_bytes) {
  line.clear();
  size_t length = 0;
  std::streambuf* buf = in.rdbuf();
  for (int c = buf->sbumpc(); c != std::char_traits<char>::eof(); c = buf->sbumpc()) {
    if (c == '\n') return length;
    if (length++ < max_bytes) line += static_cast<char>(c);
  }
  if (length == 0) return std::nullopt;
  return length;
}

LineReader::LineReader(std::istream& in, std::string source, size_t max_line, uint64_t max_total)
    : in_(in), source_(std::move(source)), max_line_(max_line), max_total_(max_total) {}

std::string LineReader::where() const { return fmt::format("{}:{}", source_, line_no_); }

std::optional<std::string> LineReader::next() {
  std::string line;
  std::streambuf* buf = in_.rdbuf();
  int c = buf->sbumpc();
  if (c == std::char_traits<char>::eof()) return std::nullopt;
  ++line_no_;
  for (; c != std::char_traits<char>::eof() && c != '\n'; c = buf->sbumpc()) {
    if (++total_ > max_total_) {
      throw DataError(
          fmt::format("{}: more than {} bytes of input; stopping", where(), max_total_));
    }
    if (c == 0) {
      throw DataError(fmt::format("{}: a NUL byte at byte {} of the line: binary input, not text",
                                  where(), line.size() + 1));
    }
    if (line.size() == max_line_) {
      throw DataError(fmt::format("{}: a line longer than {} bytes; stopping", where(), max_line_));
    }
    line += static_cast<char>(c);
  }
  ++total_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

std::vector<std::string> read_lines(const std::string& path, size_t max_line, uint64_t max_total) {
  std::ifstream file;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) throw DataError(fmt::format("{}: cannot open", path));
  }
  LineReader reader(path == "-" ? std::cin : file, path == "-" ? "stdin" : path, max_line,
                    max_total);
  std::vector<std::string> lines;
  while (const auto line = reader.next()) lines.push_back(*line);
  return lines;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    const size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    if (i > start) out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

}  // namespace tapegrad::data
