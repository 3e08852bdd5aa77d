// Vocabularies: token <-> id, built from training text at the character or whitespace-word
// level, or learned as subword units by SentencePiece (BPE or unigram). Ids 0..3 are always
// <pad>, <bos>, <eos>, <unk>; at the char and word levels the rest follow in order of first
// appearance, so a vocabulary built twice from the same data is the same.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tapegrad::data {

// Char and Word split text; Bpe and Unigram are SentencePiece models of those two kinds.
enum class Level { Char, Word, Bpe, Unigram };
// "char", "word", "bpe", "unigram"
const char* level_name(Level level);
std::optional<Level> level_from_name(std::string_view name);

// How the word level reads text: lower-cased first, and punctuation split off as tokens of its
// own (text.h's lowercase and split_words_and_punctuation); decode() then joins punctuation back
// (join_words_and_punctuation).
struct WordOptions {
  bool lowercase = false;
  bool split_punctuation = false;
  bool operator==(const WordOptions&) const = default;
};

class Vocabulary {
 public:
  static constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kUnk = 3;

  // The four special tokens alone, at the char or word level.
  explicit Vocabulary(Level level);
  // Every char or word of the texts (words read by `words`); at bpe and unigram, a model of
  // `subword_size` pieces learned from them (train_subwords), `name` standing for the texts in
  // its errors.
  static Vocabulary build(const std::vector<std::string>& texts, Level level,
                          int64_t subword_size = 1000, const std::string& name = "the texts",
                          const WordOptions& words = {});
  // A SentencePiece model of `size` pieces (the four special tokens included) learned from the
  // texts, level Bpe or Unigram. Deterministic: the same texts give the same model. Throws
  // DataError "NAME: sentencepiece: ..." with SentencePiece's reason, `name` standing for the
  // texts; a size the texts cannot fill is a VocabularySizeError holding the largest they can.
  static Vocabulary train_subwords(const std::vector<std::string>& texts, Level level, int64_t size,
                                   const std::string& name);

  Level level() const { return level_; }
  const WordOptions& word_options() const { return words_; }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  const std::string& token(int64_t id) const { return tokens_.at(id); }
  // The text's tokens; subword pieces mark a preceding space with U+2581.
  std::vector<std::string> tokenize(std::string_view text) const;
  // Token ids; unknown tokens map to <unk>. No <bos>/<eos> is added.
  std::vector<int64_t> encode(std::string_view text) const;
  // Text of the ids up to the first <eos>, skipping <pad> and <bos>; words are joined by spaces,
  // subword pieces by SentencePiece's rule (an unknown piece reads " \u2047 ").
  std::string decode(std::span<const int64_t> ids) const;

  // char and word: one token a line after a "tapegrad-vocab char|word" line (for words, then
  // " lowercase" and " split-punctuation" when set); newlines, tabs
  // and backslashes in a token are written as two-character escapes. bpe and unigram: a
  // "tapegrad-vocab bpe|unigram BYTES CHECKSUM" line, then the SentencePiece model as its
  // serialized bytes (the .model file spm_encode reads), CHECKSUM their FNV-1a 64 in hex, so
  // a damaged model is refused before SentencePiece parses it.
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
  // A subword vocabulary from a serialized SentencePiece model; `name` for messages.
  static Vocabulary from_model(Level level, std::string model, const std::string& name);
  static Vocabulary read_model(std::istream& in, const std::string& path, Level level,
                               const std::string& first_line);
  Level level_;
  WordOptions words_;
  std::vector<std::string> tokens_;
  struct Hash {  // lets ids_ be searched with a string_view, without a copy
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> ids_;
  // Bpe and Unigram: the model, shared by copies (it is never changed), and its bytes.
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> pieces_;
  std::string model_;
};

}  // namespace tapegrad::data
