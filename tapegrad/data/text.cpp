// Text helpers shared by the readers: UTF-8 validation, splitting into characters, and
// bounded line reads.
#include "tapegrad/data/text.h"

#include <fmt/core.h>

#include <algorithm>
#include <iostream>
#include <optional>

#include "tapegrad/data/data_error.h"
#include "tapegrad/io/files.h"

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

size_t char_length(std::string_view text, size_t at) {
  const size_t n = std::max<size_t>(1, sequence_length(static_cast<unsigned char>(text[at])));
  return std::min(n, text.size() - at);
}

std::vector<std::string> split_chars(std::string_view text) {
  std::vector<std::string> out;
  for_each_char(text, [&](std::string_view c) { out.emplace_back(c); });
  return out;
}

std::string escape_line(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else
      out += c;
  }
  return out;
}

std::optional<std::string> unescape_line(std::string_view line) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\\') {
      out += line[i];
      continue;
    }
    if (++i == line.size()) return std::nullopt;
    if (line[i] == '\\')
      out += '\\';
    else if (line[i] == 'n')
      out += '\n';
    else if (line[i] == 't')
      out += '\t';
    else
      return std::nullopt;
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
  try {
    std::optional<io::StreamFile> file;
    std::istream in(path == "-" ? std::cin.rdbuf() : &file.emplace(path));
    LineReader reader(in, path == "-" ? "stdin" : path, max_line, max_total);
    std::vector<std::string> lines;
    while (const auto line = reader.next()) lines.push_back(*line);
    return lines;
  } catch (const io::FileError& e) {
    throw DataError(e.what());
  }
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

namespace {

// The code point of one UTF-8 character (as split_chars gives them); an invalid sequence is
// read as U+FFFD.
char32_t code_point(std::string_view c) {
  const auto b = [&](size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(c[i])); };
  if (c.size() == 1) return b(0);
  if (c.size() == 2) return (b(0) & 0x1f) << 6 | (b(1) & 0x3f);
  if (c.size() == 3) return (b(0) & 0x0f) << 12 | (b(1) & 0x3f) << 6 | (b(2) & 0x3f);
  if (c.size() == 4)
    return (b(0) & 0x07) << 18 | (b(1) & 0x3f) << 12 | (b(2) & 0x3f) << 6 | (b(3) & 0x3f);
  return 0xfffd;
}

std::string utf8(char32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xe0 | cp >> 12);  // every lower-case letter here is below U+10000
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return out;
}

char32_t lower(char32_t cp) {
  const auto in = [&](char32_t lo, char32_t hi) { return cp >= lo && cp <= hi; };
  if (in('A', 'Z') || (in(0xc0, 0xde) && cp != 0xd7)) return cp + 0x20;      // ASCII, Latin-1
  if ((in(0x100, 0x137) || in(0x14a, 0x177)) && cp % 2 == 0) return cp + 1;  // Latin Ext-A
  if ((in(0x139, 0x148) || in(0x179, 0x17e)) && cp % 2 == 1) return cp + 1;
  if (cp == 0x178) return 0xff;
  if (in(0x391, 0x3a9) && cp != 0x3a2) return cp + 0x20;  // Greek
  if (in(0x410, 0x42f)) return cp + 0x20;                 // Cyrillic
  if (in(0x400, 0x40f)) return cp + 0x50;
  return cp;
}

bool is_punctuation(char32_t cp) {
  const auto in = [&](char32_t lo, char32_t hi) { return cp >= lo && cp <= hi; };
  return in(0x21, 0x2f) || in(0x3a, 0x40) || in(0x5b, 0x60) || in(0x7b, 0x7e) || cp == 0xa1 ||
         cp == 0xa7 || cp == 0xab || cp == 0xb6 || cp == 0xb7 || cp == 0xbb || cp == 0xbf ||
         in(0x2010, 0x2027) || in(0x2030, 0x205e) || in(0x3001, 0x3003) || in(0x3008, 0x3011) ||
         in(0xff01, 0xff0f);
}

}  // namespace

std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const std::string& c : split_chars(text)) {
    const char32_t cp = code_point(c);
    const char32_t l = lower(cp);
    out += l == cp ? c : utf8(l);
  }
  return out;
}

std::vector<std::string> split_words_and_punctuation(std::string_view text) {
  std::vector<std::string> out;
  for (const std::string& word : split_words(text)) {
    std::string part;
    for (const std::string& c : split_chars(word)) {
      if (!is_punctuation(code_point(c))) {
        part += c;
        continue;
      }
      if (!part.empty()) out.push_back(std::move(part));
      part.clear();
      out.push_back(c);
    }
    if (!part.empty()) out.push_back(std::move(part));
  }
  return out;
}

std::string join_words_and_punctuation(const std::vector<std::string>& tokens) {
  static const std::vector<std::string_view> closing = {".", ",", ";", ":", "!", "?", ")",
                                                        "]", "}", "»", "”", "’", "…", "%"};
  static const std::vector<std::string_view> opening = {"(", "[", "{", "«", "“", "‘", "¿", "¡"};
  const auto among = [](const std::vector<std::string_view>& set, const std::string& t) {
    return std::find(set.begin(), set.end(), t) != set.end();
  };
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0 && !among(closing, tokens[i]) && !among(opening, tokens[i - 1])) out += ' ';
    out += tokens[i];
  }
  return out;
}

}  // namespace tapegrad::data
