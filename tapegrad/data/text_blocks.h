// A plain text as a language model reads it: one stream of token ids, split by position (the
// last part held out), and batches of random contiguous blocks with their targets, the same
// blocks shifted by one token (nanoGPT's get_batch).
//
// At the char level every character of the text is a token, newlines included. At the bpe and
// unigram levels each line is its SentencePiece pieces followed by <eos>, which stands for the
// line break (SentencePiece has no newline piece); decode_text turns it back into one.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tapegrad/autograd/random.h"
#include "tapegrad/autograd/tensor.h"
#include "tapegrad/data/vocab.h"

namespace tapegrad::data {

struct TextOptions {
  Level level = Level::Char;    // char, bpe or unigram
  int64_t vocab_size = 1000;    // pieces of a bpe or unigram vocabulary
  double valid_fraction = 0.1;  // the end of the text held out, e.g. 0.1 for the last tenth
};

struct TextSplit {
  Vocabulary vocab{Level::Char};
  std::string train_text, valid_text;  // the text's two parts
  std::vector<int64_t> train, valid;   // their token ids
};

// The largest text a language model reads: it is held in memory as text and as ids.
constexpr uint64_t kMaxTextBytes = uint64_t{1} << 30;

// Reads a text (a regular file of valid UTF-8 without NUL bytes, at most kMaxTextBytes) and
// splits it: the first 1 - valid_fraction of its characters for training, the rest held out,
// cut at the line break nearest the point at the subword levels. The vocabulary is every
// character of the whole text at the char level (as nanoGPT's), or SentencePiece's, learned
// from the training part alone. DataError naming the file (and the byte, for invalid UTF-8),
// or when either part has fewer than `min_tokens` tokens.
TextSplit read_text(const std::string& path, const TextOptions& options, int64_t min_tokens);

// The two parts of a text encoded with `vocab` (a split read back from a run folder).
TextSplit encode_split(Vocabulary vocab, std::string train_text, std::string valid_text);

// The text's token ids in `vocab`'s way (see the top of this file).
std::vector<int64_t> encode_text(const Vocabulary& vocab, std::string_view text);
// Ids back to text: <eos> a line break, <pad>, <bos> and <unk> as Vocabulary::decode has them.
std::string decode_text(const Vocabulary& vocab, std::span<const int64_t> ids);

struct TextBatch {
  Tensor inputs;   // int64 [B, T]: tokens i .. i + T - 1 of the stream, i random per row
  Tensor targets;  // int64 [B, T]: tokens i + 1 .. i + T, what each position predicts
};
// `batch` blocks of `block_size` tokens, each starting at a position drawn from `gen`
// uniformly over those with a full block and its target after them. The tokens must number at
// least block_size + 1.
TextBatch random_blocks(std::span<const int64_t> tokens, int64_t batch, int64_t block_size,
                        Generator& gen);

}  // namespace tapegrad::data
