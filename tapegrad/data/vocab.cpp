// Vocabularies: building from text or training SentencePiece, encoding and decoding, and the
// file: escaped tokens one a line, or a checksummed SentencePiece model, read with bounds on
// its size, token length and token count.
#include "tapegrad/data/vocab.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <array>
#include <charconv>
#include <cstring>

#include "tapegrad/data/data_error.h"
#include "tapegrad/data/text.h"
#include "tapegrad/io/files.h"

namespace tapegrad::data {

namespace {
bool is_subword(Level level) { return level == Level::Bpe || level == Level::Unigram; }

constexpr std::array<const char*, 4> kLevelNames = {"char", "word", "bpe", "unigram"};

// FNV-1a, 64 bits: detects a damaged model file; not a defence against a forged one.
uint64_t fnv1a(std::string_view bytes) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The texts, one sentence at a time, as SentencePiece's trainer reads them.
class Sentences : public sentencepiece::SentenceIterator {
 public:
  explicit Sentences(const std::vector<std::string>& texts) : texts_(texts) {}
  bool done() const override { return i_ >= texts_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return texts_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& texts_;
  size_t i_ = 0;
};
}  // namespace

const char* level_name(Level level) { return kLevelNames.at(static_cast<size_t>(level)); }

std::optional<Level> level_from_name(std::string_view name) {
  for (size_t i = 0; i < kLevelNames.size(); ++i) {
    if (name == kLevelNames[i]) return static_cast<Level>(i);
  }
  return std::nullopt;
}

Vocabulary::Vocabulary(Level level) : level_(level) {
  if (is_subword(level)) {
    throw DataError(fmt::format("a {} vocabulary is learned (train_subwords) or loaded, not empty",
                                level_name(level)));
  }
  for (const char* special : {"<pad>", "<bos>", "<eos>", "<unk>"}) add(special);
}

int64_t Vocabulary::add(const std::string& token) {
  auto [it, inserted] = ids_.emplace(token, size());
  if (inserted) tokens_.push_back(token);
  return it->second;
}

Vocabulary Vocabulary::build(const std::vector<std::string>& texts, Level level,
                             int64_t subword_size, const std::string& name,
                             const WordOptions& words) {
  if (is_subword(level)) return train_subwords(texts, level, subword_size, name);
  Vocabulary v(level);
  if (level == Level::Word) v.words_ = words;
  for (const std::string& t : texts) {
    if (level == Level::Char) {  // a character is looked up before it is copied
      for_each_char(t, [&](std::string_view c) {
        if (!v.ids_.contains(c)) v.add(std::string(c));
      });
      continue;
    }
    for (const std::string& token : v.tokenize(t)) v.add(token);
  }
  return v;
}

// The pad, bos, eos and unk ids are fixed to ours, so SentencePiece's ids are the vocabulary's.
// Every character of the texts is kept (coverage 1), sentences are read in order with none
// sampled away, and one thread trains: so the model depends on the texts alone.
Vocabulary Vocabulary::train_subwords(const std::vector<std::string>& texts, Level level,
                                      int64_t size, const std::string& name) {
  if (!is_subword(level)) {
    throw DataError(
        fmt::format("{}: train_subwords takes bpe or unigram, not {}", name, level_name(level)));
  }
  if (size < 5 || size > kMaxTokens) {
    throw DataError(fmt::format("{}: a subword vocabulary of {} pieces; it must be 5 to {}", name,
                                size, kMaxTokens));
  }
  Sentences sentences(texts);
  std::string model;
  const auto status =
      sentencepiece::SentencePieceTrainer::Train({{"model_type", level_name(level)},
                                                  {"vocab_size", std::to_string(size)},
                                                  {"pad_id", "0"},
                                                  {"bos_id", "1"},
                                                  {"eos_id", "2"},
                                                  {"unk_id", "3"},
                                                  {"character_coverage", "1.0"},
                                                  {"input_sentence_size", "0"},
                                                  {"shuffle_input_sentence", "false"},
                                                  {"num_threads", "1"},
                                                  {"minloglevel", "2"}},
                                                 &sentences, &model);
  if (!status.ok()) {
    // "./src/trainer_interface.cc(660) [a == b] Vocabulary size too high ...": the reason alone
    std::string_view why = status.message();
    if (why.starts_with("./src/") && why.find("] ") != std::string_view::npos)
      why.remove_prefix(why.find("] ") + 2);
    const std::string what = fmt::format("{}: sentencepiece: {}", name, why);
    // "Vocabulary size too high (2000). Please set it to a value <= 406."
    const size_t at = why.find("Please set it to a value <= ");
    if (why.starts_with("Vocabulary size too high") && at != std::string_view::npos) {
      const int64_t largest = std::atoll(std::string(why.substr(at + 28)).c_str());
      if (largest >= 5) throw VocabularySizeError(what, largest);
    }
    throw DataError(what);
  }
  return from_model(level, std::move(model), name);
}

namespace {

// A varint at text[at...]; false when it runs past the end or over 10 bytes.
bool varint(std::string_view text, size_t& at, uint64_t& out) {
  out = 0;
  for (int shift = 0; shift < 70 && at < text.size(); shift += 7) {
    const auto b = static_cast<unsigned char>(text[at++]);
    out |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// Calls field(number, wire_type, value or length, payload) for each field of a message;
// false on a malformed one.
template <class F>
bool scan_fields(std::string_view message, F&& field) {
  size_t at = 0;
  while (at < message.size()) {
    uint64_t key = 0, value = 0;
    if (!varint(message, at, key)) return false;
    const uint64_t number = key >> 3, type = key & 7;
    std::string_view payload;
    if (type == 0) {
      if (!varint(message, at, value)) return false;
    } else if (type == 1 || type == 5) {
      const size_t n = type == 1 ? 8 : 4;
      if (message.size() - at < n) return false;
      at += n;
    } else if (type == 2) {
      if (!varint(message, at, value) || value > message.size() - at) return false;
      payload = message.substr(at, value);
      at += value;
    } else {
      return false;
    }
    field(number, type, value, payload);
  }
  return true;
}

// The model type a serialized SentencePiece ModelProto was trained as: trainer_spec (field 2)
// holds model_type (field 3: 1 unigram, the default; 2 bpe). Read by a bounded scan of the
// protobuf wire format, since Debian's package ships no ModelProto header; nullopt when the
// bytes are not that format.
std::optional<int64_t> trained_model_type(std::string_view model) {
  int64_t type = 1;
  bool ok = true;
  const bool scanned = scan_fields(model, [&](uint64_t number, uint64_t wire, uint64_t,
                                              std::string_view payload) {
    if (number != 2 || wire != 2) return;
    ok = ok && scan_fields(payload, [&](uint64_t n, uint64_t t, uint64_t value, std::string_view) {
           if (n == 3 && t == 0) type = static_cast<int64_t>(value);
         });
  });
  if (!scanned || !ok) return std::nullopt;
  return type;
}

}  // namespace

Vocabulary Vocabulary::from_model(Level level, std::string model, const std::string& name) {
  auto processor = std::make_shared<sentencepiece::SentencePieceProcessor>();
  const auto status = processor->LoadFromSerializedProto(model);
  if (!status.ok()) {
    throw DataError(fmt::format("{}: not a SentencePiece model: {}", name, status.message()));
  }
  if (processor->pad_id() != kPad || processor->bos_id() != kBos || processor->eos_id() != kEos ||
      processor->unk_id() != kUnk) {
    throw DataError(fmt::format(
        "{}: the model's <pad>, <bos>, <eos>, <unk> are ids {}, {}, {}, {}; expected 0, 1, 2, 3",
        name, processor->pad_id(), processor->bos_id(), processor->eos_id(), processor->unk_id()));
  }
  const int pieces = processor->GetPieceSize();
  if (pieces > kMaxTokens) {
    throw DataError(fmt::format("{}: {} pieces, over the limit of {}", name, pieces, kMaxTokens));
  }
  const std::optional<int64_t> type = trained_model_type(model);
  if (!type) throw DataError(fmt::format("{}: the model's trainer_spec is malformed", name));
  if (*type != (level == Level::Bpe ? 2 : 1)) {
    throw DataError(fmt::format("{}: the file says {}, but the model was trained as type {} ({})",
                                name, level_name(level), *type,
                                *type == 1   ? "unigram"
                                : *type == 2 ? "bpe"
                                             : "neither bpe nor unigram"));
  }
  Vocabulary v(level == Level::Bpe ? Level::Char : Level::Word);  // the specials, ids 0-3
  v.level_ = level;
  for (int id = 4; id < pieces; ++id) {
    const std::string& piece = processor->IdToPiece(id);
    if (piece.empty() || find_invalid_utf8(piece)) {
      throw DataError(
          fmt::format("{}: piece {} is {}", name, id, piece.empty() ? "empty" : "not valid UTF-8"));
    }
    if (v.add(piece) != id) {
      throw DataError(fmt::format("{}: piece {} '{}' repeated", name, id, piece.substr(0, 40)));
    }
  }
  v.pieces_ = std::move(processor);
  v.model_ = std::move(model);
  return v;
}

std::vector<std::string> Vocabulary::tokenize(std::string_view text) const {
  if (pieces_) {
    std::vector<std::string> out;
    pieces_->Encode(text, &out).IgnoreError();  // fails only without a model
    return out;
  }
  if (level_ == Level::Char) return split_chars(text);
  const std::string lowered = words_.lowercase ? lowercase(text) : std::string();
  const std::string_view read = words_.lowercase ? std::string_view(lowered) : text;
  return words_.split_punctuation ? split_words_and_punctuation(read) : split_words(read);
}

std::vector<int64_t> Vocabulary::encode(std::string_view text) const {
  if (pieces_) {
    std::vector<int> ids;
    pieces_->Encode(text, &ids).IgnoreError();
    return {ids.begin(), ids.end()};
  }
  std::vector<int64_t> ids;
  const auto look_up = [&](std::string_view token) {
    const auto it = ids_.find(token);
    ids.push_back(it == ids_.end() ? kUnk : it->second);
  };
  if (level_ == Level::Char) {
    for_each_char(text, look_up);  // no list of the characters built
  } else {
    for (const std::string& token : tokenize(text)) look_up(token);
  }
  return ids;
}

std::string Vocabulary::decode(std::span<const int64_t> ids) const {
  std::string out;
  if (pieces_) {
    std::vector<int> kept;
    for (int64_t id : ids) {
      if (id == kEos) break;
      if (id == kPad || id == kBos) continue;
      kept.push_back(id >= 0 && id < size() ? static_cast<int>(id) : static_cast<int>(kUnk));
    }
    pieces_->Decode(kept, &out).IgnoreError();
    return out;
  }
  std::vector<std::string> tokens;
  for (int64_t id : ids) {
    if (id == kEos) break;
    if (id == kPad || id == kBos) continue;
    tokens.push_back(id >= 0 && id < size() ? tokens_[id] : tokens_[kUnk]);
  }
  if (level_ == Level::Char) {
    for (const std::string& t : tokens) out += t;
    return out;
  }
  if (words_.split_punctuation) return join_words_and_punctuation(tokens);
  for (const std::string& t : tokens) out += (out.empty() ? "" : " ") + t;
  return out;
}

void Vocabulary::save(const std::string& path) const {
  std::string text =
      fmt::format("tapegrad-vocab {}{}{}", level_name(level_), words_.lowercase ? " lowercase" : "",
                  words_.split_punctuation ? " split-punctuation" : "");
  if (pieces_) {
    text += fmt::format(" {} {:016x}\n", model_.size(), fnv1a(model_)) + model_;
  } else {
    text += '\n';
    for (const std::string& t : tokens_) text += escape_line(t) + '\n';
  }
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

// The rest of a subword vocabulary's file, after its first line: the model's bytes, exactly as
// many as the line says and with its checksum.
Vocabulary Vocabulary::read_model(std::istream& in, const std::string& path, Level level,
                                  const std::string& first_line) {
  const std::string prefix = fmt::format("tapegrad-vocab {} ", level_name(level));
  uint64_t bytes = 0, checksum = 0;
  const std::string_view rest = first_line.starts_with(prefix)
                                    ? std::string_view(first_line).substr(prefix.size())
                                    : std::string_view();
  const size_t space = rest.find(' ');
  const auto number = [](std::string_view text, int base, uint64_t& out) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out, base);
    return !text.empty() && error == std::errc() && end == text.data() + text.size();
  };
  if (space == std::string_view::npos || !number(rest.substr(0, space), 10, bytes) ||
      rest.size() - space - 1 != 16 || !number(rest.substr(space + 1), 16, checksum)) {
    throw DataError(fmt::format("{}:1: expected '{}BYTES CHECKSUM' (a byte count, 16 hex digits)",
                                path, prefix));
  }
  if (bytes > kMaxFileBytes) {
    throw DataError(fmt::format("{}:1: a model of {} bytes is over the limit of {}", path, bytes,
                                kMaxFileBytes));
  }
  std::string model;
  char chunk[1 << 16];
  while (model.size() < bytes) {  // grows with what is really there, not with the claim
    in.read(chunk,
            static_cast<std::streamsize>(std::min<uint64_t>(sizeof chunk, bytes - model.size())));
    if (in.gcount() == 0) break;
    model.append(chunk, static_cast<size_t>(in.gcount()));
  }
  if (model.size() < bytes) {
    throw DataError(fmt::format("{}: the model is {} bytes, the first line says {}", path,
                                model.size(), bytes));
  }
  if (in.peek() != std::char_traits<char>::eof())
    throw DataError(fmt::format("{}: bytes after the model's {}", path, bytes));
  if (fnv1a(model) != checksum) {
    throw DataError(
        fmt::format("{}: the model's checksum is {:016x}, the first line says {:016x}: the file "
                    "is damaged",
                    path, fnv1a(model), checksum));
  }
  return from_model(level, std::move(model), path);
}

namespace {

// The word options after the level on a char or word vocabulary's first line ("tapegrad-vocab
// word lowercase split-punctuation"), in save()'s order; any other text is a DataError.
WordOptions options_after_level(const std::string& line, Level level, const std::string& path) {
  const size_t start = std::string_view("tapegrad-vocab ").size();
  std::string_view rest = std::string_view(line).substr(start + std::strlen(level_name(level)));
  WordOptions words;
  for (const auto& [option, flag] : {std::pair{" lowercase", &words.lowercase},
                                     {" split-punctuation", &words.split_punctuation}}) {
    if (level == Level::Word && rest.starts_with(option)) {
      *flag = true;
      rest.remove_prefix(std::strlen(option));
    }
  }
  if (!rest.empty()) {
    throw DataError(fmt::format("{}:1: unexpected text after '{}'", path,
                                line.substr(start, line.size() - rest.size() - start)));
  }
  return words;
}

}  // namespace

Vocabulary Vocabulary::read(std::istream& in, const std::string& path) {
  constexpr size_t kMaxTokenBytes = 1024;
  std::string line;
  read_line(in, line, kMaxTokenBytes);
  const std::string_view magic = "tapegrad-vocab ";
  const std::optional<Level> level =
      line.starts_with(magic) ? level_from_name(std::string_view(line).substr(
                                    magic.size(), line.find(' ', magic.size()) - magic.size()))
                              : std::nullopt;
  if (!level) {
    throw DataError(fmt::format(
        "{}:1: expected 'tapegrad-vocab' and a level: char, word, bpe or unigram", path));
  }
  if (is_subword(*level)) return read_model(in, path, *level, line);
  Vocabulary v(*level);
  v.words_ = options_after_level(line, *level, path);
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
    const auto token = unescape_line(line);
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
