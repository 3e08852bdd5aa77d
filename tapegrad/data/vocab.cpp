// Vocabularies: building from text, encoding and decoding, and the escaped one-token-a-line
// file, read with bounds on its size, token length and token count.
#include "tapegrad/data/vocab.h"

#include <fmt/format.h>

#include "tapegrad/data/error.h"
#include "tapegrad/data/text.h"
#include "tapegrad/io/files.h"

namespace tapegrad::data {

namespace {
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
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

// nullopt on a bad escape
std::optional<std::string> unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i == s.size()) return std::nullopt;
    if (s[i] == '\\')
      out += '\\';
    else if (s[i] == 'n')
      out += '\n';
    else if (s[i] == 't')
      out += '\t';
    else
      return std::nullopt;
  }
  return out;
}
}  // namespace

Vocabulary::Vocabulary(Level level) : level_(level) {
  for (const char* special : {"<pad>", "<bos>", "<eos>", "<unk>"}) add(special);
}

int64_t Vocabulary::add(const std::string& token) {
  auto [it, inserted] = ids_.emplace(token, size());
  if (inserted) tokens_.push_back(token);
  return it->second;
}

Vocabulary Vocabulary::build(const std::vector<std::string>& texts, Level level) {
  Vocabulary v(level);
  for (const std::string& t : texts) {
    for (const std::string& token : v.tokenize(t)) v.add(token);
  }
  return v;
}

std::vector<std::string> Vocabulary::tokenize(std::string_view text) const {
  return level_ == Level::Char ? split_chars(text) : split_words(text);
}

std::vector<int64_t> Vocabulary::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  for (const std::string& token : tokenize(text)) {
    auto it = ids_.find(token);
    ids.push_back(it == ids_.end() ? kUnk : it->second);
  }
  return ids;
}

std::string Vocabulary::decode(std::span<const int64_t> ids) const {
  std::string out;
  for (int64_t id : ids) {
    if (id == kEos) break;
    if (id == kPad || id == kBos) continue;
    if (level_ == Level::Word && !out.empty()) out += ' ';
    out += id >= 0 && id < size() ? tokens_[id] : tokens_[kUnk];
  }
  return out;
}

void Vocabulary::save(const std::string& path) const {
  std::string text = level_ == Level::Char ? "tapegrad-vocab char\n" : "tapegrad-vocab word\n";
  for (const std::string& t : tokens_) text += escape(t) + '\n';
  try {
    io::write_atomic(path, text);
  } catch (const io::FileError& e) {
    throw DataError(e.what());
  }
}

Vocabulary Vocabulary::load(const std::string& path) {
  try {
    io::OpenedFile f = io::open_regular(path, kMaxFileBytes);
    return read(f.stream, path);
  } catch (const io::FileError& e) {
    throw DataError(e.what());
  }
}

Vocabulary Vocabulary::read(std::istream& in, const std::string& path) {
  constexpr size_t kMaxTokenBytes = 1024;
  std::string line;
  read_line(in, line, kMaxTokenBytes);
  if (line != "tapegrad-vocab char" && line != "tapegrad-vocab word") {
    throw DataError(
        fmt::format("{}:1: expected 'tapegrad-vocab char' or 'tapegrad-vocab word'", path));
  }
  Vocabulary v(line == "tapegrad-vocab char" ? Level::Char : Level::Word);
  const std::vector<std::string> specials = v.tokens_;
  v.tokens_.clear();
  v.ids_.clear();
  int64_t line_no = 1;
  while (const auto length = read_line(in, line, kMaxTokenBytes)) {
    ++line_no;
    if (*length > kMaxTokenBytes) {
      throw DataError(fmt::format("{}:{}: token of {} bytes is over the limit of {}", path, line_no,
                                  *length, kMaxTokenBytes));
    }
    if (find_invalid_utf8(line))
      throw DataError(fmt::format("{}:{}: invalid UTF-8", path, line_no));
    const auto token = unescape(line);
    if (!token || token->empty())
      throw DataError(fmt::format("{}:{}: bad token '{}'", path, line_no, line));
    if (v.ids_.contains(*token)) {
      throw DataError(fmt::format("{}:{}: token '{}' repeated", path, line_no, line));
    }
    if (v.size() == kMaxTokens) {
      throw DataError(fmt::format("{}:{}: more than {} tokens", path, line_no, kMaxTokens));
    }
    const auto id = static_cast<size_t>(v.size());
    if (id < specials.size() && *token != specials[id]) {
      throw DataError(fmt::format("{}:{}: expected special token '{}', got '{}'", path, line_no,
                                  specials[id], line));
    }
    v.add(*token);
  }
  if (v.size() < static_cast<int64_t>(specials.size())) {
    throw DataError(
        fmt::format("{}: only {} tokens, the 4 special tokens are missing", path, v.size()));
  }
  return v;
}

}  // namespace tapegrad::data
