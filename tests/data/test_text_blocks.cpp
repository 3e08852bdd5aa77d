// A text for a language model: the split by position, the encoding at the char and subword
// levels and back, random blocks and their shifted targets, and the reader's errors.
#include <fstream>

#include "helpers.h"
#include "tapegrad/data/data_error.h"
#include "tapegrad/data/text_blocks.h"

using namespace tapegrad;
using namespace tapegrad::data;
using tapegrad::testing::TempDir;

namespace {
std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = (dir.path / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}
}  // namespace

TEST_CASE("a text is split by position: the last tenth held out", "[data]") {
  TempDir dir;
  // 100 characters, two of them two bytes long: the split counts characters, not bytes
  std::string text = "é";
  for (int i = 0; i < 97; ++i) text += static_cast<char>('a' + i % 26);
  text += "ü\n";
  const TextSplit s = read_text(write(dir, "t.txt", text), {.valid_fraction = 0.1}, 2);
  REQUIRE(s.train.size() == 90);
  REQUIRE(s.valid.size() == 10);
  REQUIRE(decode_text(s.vocab, s.train) + decode_text(s.vocab, s.valid) == text);
  REQUIRE(decode_text(s.vocab, s.valid) == "lmnopqrsü\n");
  // every character of the whole text has an id: none held out is unknown
  for (int64_t id : s.valid) REQUIRE(id != Vocabulary::kUnk);
}

TEST_CASE("at the subword levels a line ends in <eos> and the split falls between lines",
          "[data]") {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the cat sat on the mat " + std::to_string(i % 7) + "\n";
  const std::string path = write(dir, "t.txt", text);
  const TextSplit s = read_text(path, {.level = Level::Bpe, .vocab_size = 40}, 2);
  REQUIRE(s.train.back() == Vocabulary::kEos);
  REQUIRE(s.valid.back() == Vocabulary::kEos);
  REQUIRE(decode_text(s.vocab, s.train) + decode_text(s.vocab, s.valid) == text);
  const std::string held_out = decode_text(s.vocab, s.valid);
  REQUIRE(std::count(held_out.begin(), held_out.end(), '\n') == 4);  // a tenth of 40 lines
  REQUIRE(encode_text(s.vocab, "the mat\n\nthe cat") ==
          std::vector<int64_t>{s.vocab.encode("the mat")[0], s.vocab.encode("the mat")[1],
                               Vocabulary::kEos, Vocabulary::kEos, s.vocab.encode("the cat")[0],
                               s.vocab.encode("the cat")[1], Vocabulary::kEos});
}

TEST_CASE("random blocks: contiguous, targets shifted by one, from the seed alone", "[data]") {
  std::vector<int64_t> tokens(50);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i);
  Generator gen(4), again(4);
  const TextBatch b = random_blocks(tokens, 64, 8, gen);
  REQUIRE(b.inputs.shape() == Shape({64, 8}));
  const auto x = b.inputs.to_vector<int64_t>(), y = b.targets.to_vector<int64_t>();
  int64_t first = 50, last = -1;
  for (int64_t r = 0; r < 64; ++r) {
    for (int64_t t = 0; t < 8; ++t) {
      REQUIRE(x[r * 8 + t] == x[r * 8] + t);
      REQUIRE(y[r * 8 + t] == x[r * 8 + t] + 1);
    }
    first = std::min(first, x[r * 8]);
    last = std::max(last, y[r * 8 + 7]);
  }
  REQUIRE(first >= 0);
  REQUIRE(last <= 49);
  REQUIRE(random_blocks(tokens, 64, 8, again).inputs.to_vector<int64_t>() == x);
  // the starts cover the range: 64 draws of 42 positions reach both ends' neighbourhoods
  REQUIRE(first <= 3);
  REQUIRE(last >= 46);
  std::vector<int64_t> nine(9);
  REQUIRE(random_blocks(nine, 1, 8, gen).targets.to_vector<int64_t>().size() == 8);
  REQUIRE_THROWS_WITH(random_blocks(std::vector<int64_t>(8), 1, 8, gen),
                      Catch::Contains("1 blocks of 8 tokens from 8 tokens"));
}

TEST_CASE("a text the model cannot read is named with what is wrong", "[data][errors]") {
  TempDir dir;
  REQUIRE_THROWS_WITH(read_text(write(dir, "bad.txt", "ab\xff\xfe cd"), {}, 2),
                      Catch::Contains("bad.txt: invalid UTF-8 at byte 2"));
  REQUIRE_THROWS_WITH(read_text(write(dir, "nul.txt", std::string("ab\0cd", 5)), {}, 2),
                      Catch::Contains("nul.txt: a NUL byte at byte 2"));
  REQUIRE_THROWS_WITH(read_text(write(dir, "short.txt", "abcdefghij\n"), {}, 4),
                      Catch::Contains("short.txt: 9 training and 2 held-out tokens; each part "
                                      "needs at least 4"));
  REQUIRE_THROWS_WITH(read_text(write(dir, "w.txt", "a b c"), {.level = Level::Word}, 1),
                      Catch::Contains("w.txt: a language model reads a text at the char, bpe or "
                                      "unigram level, not word"));
  REQUIRE_THROWS_WITH(read_text(dir.path.string(), {}, 1), Catch::Contains("not a regular file"));
  REQUIRE_THROWS_WITH(read_text(write(dir, "f.txt", "abc"), {.valid_fraction = 1}, 1),
                      Catch::Contains("the held-out fraction 1 is outside (0, 1)"));
}
