// A text for a language model: read and checked, split by position, encoded as one stream, and
// drawn from as random blocks.
#include "tapegrad/data/text_blocks.h"

#include <fmt/format.h>

#include <cstring>

#include "tapegrad/data/data_error.h"
#include "tapegrad/data/text.h"
#include "tapegrad/io/files.h"

namespace tapegrad::data {

namespace {

std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    lines.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// The byte where the held-out part begins: after `1 - fraction` of the text's characters, moved
// to the nearest start of a line at the subword levels (a line is encoded whole).
size_t split_point(std::string_view text, double fraction, bool at_line) {
  size_t chars = 0;
  for (char c : text) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  const auto wanted = static_cast<size_t>(static_cast<double>(chars) * (1 - fraction));
  size_t at = 0;
  for (size_t seen = 0; at < text.size(); ++at) {
    if ((static_cast<unsigned char>(text[at]) & 0xC0) != 0x80 && seen++ == wanted) break;
  }
  if (!at_line || at == 0) return at;
  const size_t line_start = text.rfind('\n', at - 1) + 1;  // npos + 1 is 0
  const size_t line_end = text.find('\n', at);
  const size_t next_start = line_end == std::string_view::npos ? text.size() : line_end + 1;
  return at - line_start <= next_start - at ? line_start : next_start;
}

}  // namespace

TextSplit read_text(const std::string& path, const TextOptions& options, int64_t min_tokens) {
  const bool subword = options.level == Level::Bpe || options.level == Level::Unigram;
  if (!subword && options.level != Level::Char) {
    throw DataError(
        fmt::format("{}: a language model reads a text at the char, bpe or unigram "
                    "level, not {}",
                    path, level_name(options.level)));
  }
  if (!(options.valid_fraction > 0 && options.valid_fraction < 1)) {
    throw DataError(fmt::format("{}: the held-out fraction {} is outside (0, 1)", path,
                                options.valid_fraction));
  }
  const std::string text = io::read_regular(path, kMaxTextBytes);
  if (const auto bad = find_invalid_utf8(text)) {
    throw DataError(fmt::format("{}: invalid UTF-8 at byte {}", path, *bad));
  }
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    throw DataError(fmt::format("{}: a NUL byte at byte {} (not a text file)", path, nul));
  }
  const size_t cut = split_point(text, options.valid_fraction, subword);
  const std::string_view train_text = std::string_view(text).substr(0, cut);
  const std::string_view valid_text = std::string_view(text).substr(cut);
  Vocabulary vocab = subword ? Vocabulary::train_subwords(lines_of(train_text), options.level,
                                                          options.vocab_size, path)
                             : Vocabulary::build({text}, Level::Char);
  TextSplit split =
      encode_split(std::move(vocab), std::string(train_text), std::string(valid_text));
  const auto train_n = static_cast<int64_t>(split.train.size());
  const auto valid_n = static_cast<int64_t>(split.valid.size());
  if (train_n < min_tokens || valid_n < min_tokens) {
    throw DataError(fmt::format(
        "{}: {} training and {} held-out tokens; each part needs at least {} (a block and its "
        "target)",
        path, train_n, valid_n, min_tokens));
  }
  return split;
}

TextSplit encode_split(Vocabulary vocab, std::string train_text, std::string valid_text) {
  TextSplit split{std::move(vocab), std::move(train_text), std::move(valid_text), {}, {}};
  split.train = encode_text(split.vocab, split.train_text);
  split.valid = encode_text(split.vocab, split.valid_text);
  return split;
}

std::vector<int64_t> encode_text(const Vocabulary& vocab, std::string_view text) {
  if (vocab.level() == Level::Char) return vocab.encode(text);
  std::vector<int64_t> ids;
  for (const std::string& line : lines_of(text)) {
    for (int64_t id : vocab.encode(line)) ids.push_back(id);
    ids.push_back(Vocabulary::kEos);
  }
  return ids;
}

std::string decode_text(const Vocabulary& vocab, std::span<const int64_t> ids) {
  std::string out;
  size_t start = 0;
  for (size_t i = 0; i <= ids.size(); ++i) {
    if (i < ids.size() && ids[i] != Vocabulary::kEos) continue;
    out += vocab.decode(ids.subspan(start, i - start));
    if (i < ids.size()) out += '\n';
    start = i + 1;
  }
  return out;
}

TextBatch random_blocks(std::span<const int64_t> tokens, int64_t batch, int64_t block_size,
                        Generator& gen) {
  const auto n = static_cast<int64_t>(tokens.size());
  TG_CHECK(batch >= 1 && block_size >= 1 && n >= block_size + 1,
           "random_blocks: {} blocks of {} tokens from {} tokens (need at least one block and "
           "its target)",
           batch, block_size, n);
  TextBatch b{empty({batch, block_size}, DType::Int64), empty({batch, block_size}, DType::Int64)};
  int64_t* x = b.inputs.data<int64_t>();
  int64_t* y = b.targets.data<int64_t>();
  for (int64_t r = 0; r < batch; ++r) {
    const auto i = static_cast<int64_t>(gen.below(static_cast<uint64_t>(n - block_size)));
    std::memcpy(x + r * block_size, tokens.data() + i, block_size * sizeof(int64_t));
    std::memcpy(y + r * block_size, tokens.data() + i + 1, block_size * sizeof(int64_t));
  }
  return b;
}

}  // namespace tapegrad::data
