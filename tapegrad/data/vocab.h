// Vocabularies: token <-> id, built from training text at the character or whitespace-word
// level. Ids 0..3 are always <pad>, <bos>, <eos>, <unk>; the rest follow in order of first
// appearance, so a vocabulary built twice from the same data is the same.
#pragma once

#include <cstdint>
#include <istream>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tapegrad::data {

enum class Level { Char, Word };

class Vocabulary {
 public:
  static constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kUnk = 3;

  explicit Vocabulary(Level level);
  static Vocabulary build(const std::vector<std::string>& texts, Level level);

  Level level() const { return level_; }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  const std::string& token(int64_t id) const { return tokens_.at(id); }
  std::vector<std::string> tokenize(std::string_view text) const;
  // Token ids; unknown tokens map to <unk>. No <bos>/<eos> is added.
  std::vector<int64_t> encode(std::string_view text) const;
  // Text of the ids up to the first <eos>, skipping <pad> and <bos>; words are joined by spaces.
  std::string decode(std::span<const int64_t> ids) const;

  // One token a line after a "tapegrad-vocab char|word" line; newlines, tabs and backslashes
  // in a token are written as two-character escapes.
  // Atomic (io::write_atomic).
  void save(const std::string& path) const;
  // Throws data::DataError naming the file and line; only a regular file of at most
  // kMaxFileBytes (a million tokens of a kilobyte each: tokens are at most 1024 bytes) and at
  // most kMaxTokens tokens, the largest vocabulary a MiniTransformerConfig accepts.
  static constexpr uint64_t kMaxFileBytes = uint64_t{1} << 30;
  static constexpr int64_t kMaxTokens = 1'000'000;
  static Vocabulary load(const std::string& path);
  // The same from a stream; `name` stands for the file in messages.
  static Vocabulary read(std::istream& in, const std::string& name);

 private:
  int64_t add(const std::string& token);
  Level level_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> ids_;
};

}  // namespace tapegrad::data
