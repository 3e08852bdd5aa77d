// data/: vocabularies, TSV corpora and their errors, built-in tasks, teacher-forcing batches.
#include <filesystem>
#include <fstream>
#include <set>

#include "helpers.h"
#include "tapegrad/data/batch.h"
#include "tapegrad/data/data_error.h"
#include "tapegrad/data/tasks.h"
#include "tapegrad/data/text.h"
#include "tapegrad/io/files.h"

using namespace tapegrad;
using namespace tapegrad::data;
namespace fs = std::filesystem;

namespace {
struct TempFile {
  std::string path =
      (fs::temp_directory_path() / fmt::format("tapegrad-data-{}", ::getpid())).string();
  ~TempFile() { fs::remove(path); }
  const std::string& write(const std::string& content) const {
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
};
}  // namespace

TEST_CASE("character and word vocabularies", "[data]") {
  const Vocabulary chars = Vocabulary::build({"héllo", "hi"}, Level::Char);
  CHECK(chars.size() == 4 + 5);  // specials + h é l o i
  CHECK(chars.token(5) == "é");
  CHECK(chars.encode("hoi") == std::vector<int64_t>{4, 7, 8});
  CHECK(chars.encode("hx") == std::vector<int64_t>{4, Vocabulary::kUnk});
  const std::vector<int64_t> ids{Vocabulary::kBos, 4, 5, Vocabulary::kEos, 6};
  CHECK(chars.decode(ids) == "hé");
  const Vocabulary words = Vocabulary::build({"the cat  sat", "the\tdog"}, Level::Word);
  CHECK(words.tokenize("the cat  sat") == std::vector<std::string>{"the", "cat", "sat"});
  const std::vector<int64_t> w{4, 5, 7};
  CHECK(words.decode(w) == "the cat dog");
}

TEST_CASE("vocabularies round-trip through their file", "[data]") {
  TempFile f;
  const Vocabulary v = Vocabulary::build({"a\\b c", "tab"}, Level::Char);
  v.save(f.path);
  const Vocabulary back = Vocabulary::load(f.path);
  REQUIRE(back.size() == v.size());
  for (int64_t i = 0; i < v.size(); ++i) CHECK(back.token(i) == v.token(i));
  CHECK_THROWS_WITH(
      Vocabulary::load(f.write("nope\n")),
      f.path + ":1: expected 'tapegrad-vocab' and a level: char, word, bpe or unigram");
  CHECK_THROWS_WITH(Vocabulary::load(f.write("tapegrad-vocab char 12\n")),
                    f.path + ":1: unexpected text after 'char'");
  CHECK_THROWS_WITH(
      Vocabulary::load(f.write("tapegrad-vocab char\n<pad>\n<bos>\n<eos>\n<unk>\na\na\n")),
      f.path + ":7: token 'a' repeated");
  CHECK_THROWS_WITH(Vocabulary::load(f.write("tapegrad-vocab char\n<pad>\nx\n")),
                    f.path + ":3: expected special token '<bos>', got 'x'");
}

TEST_CASE("the word level lower-cases and splits punctuation off, on request", "[data]") {
  CHECK(data::lowercase("ÉCOLE Ärger ŁÓDŹ ΑΘΗΝΑ МОСКВА Ÿ 42!") ==
        "école ärger łódź αθηνα москва ÿ 42!");
  CHECK(data::split_words_and_punctuation("¿Sí? «Hola», dijo... (bien)") ==
        std::vector<std::string>{"¿", "Sí", "?", "«", "Hola", "»", ",", "dijo", ".", ".", ".", "(",
                                 "bien", ")"});
  CHECK(data::join_words_and_punctuation({"¿", "sí", "?", "«", "hola", "»", ",", "dijo", "(",
                                          "bien", ")", "."}) == "¿sí? «hola», dijo (bien).");
  const data::WordOptions both{.lowercase = true, .split_punctuation = true};
  const Vocabulary v = Vocabulary::build({"The cat, the DOG."}, Level::Word, 0, "t", both);
  CHECK(v.size() == 4 + 5);  // the cat , dog .
  CHECK(v.tokenize("THE Dog.") == std::vector<std::string>{"the", "dog", "."});
  CHECK(v.decode(v.encode("The cat, the dog.")) == "the cat, the dog.");
  // kept in the file, and read back
  TempFile f;
  v.save(f.path);
  CHECK(io::read_regular(f.path, 100)
            .starts_with("tapegrad-vocab word lowercase split-punctuation\n"));
  CHECK(Vocabulary::load(f.path).word_options() == both);
  CHECK(Vocabulary::load(f.path).encode("the DOG.") == v.encode("the dog ."));
  CHECK_THROWS_WITH(Vocabulary::load(f.write("tapegrad-vocab word uppercase\n")),
                    f.path + ":1: unexpected text after 'word'");
  CHECK_THROWS_WITH(Vocabulary::load(f.write("tapegrad-vocab char lowercase\n")),
                    f.path + ":1: unexpected text after 'char'");
  // without the options, as before
  const Vocabulary plain = Vocabulary::build({"The cat, the DOG."}, Level::Word);
  CHECK(plain.tokenize("The cat,") == std::vector<std::string>{"The", "cat,"});
}

TEST_CASE("a vocabulary file is bounded in size, token length and token count", "[data][errors]") {
  TempFile f;
  std::string text = "tapegrad-vocab word\n<pad>\n<bos>\n<eos>\n<unk>\n";
  for (int64_t i = 4; i < Vocabulary::kMaxTokens + 1; ++i) text += std::to_string(i) + '\n';
  CHECK_THROWS_WITH(Vocabulary::load(f.write(text)), f.path + ":1000002: more than 1000000 tokens");
  CHECK_THROWS_WITH(
      Vocabulary::load(f.write("tapegrad-vocab char\n" + std::string(5000, 'x') + "\n")),
      f.path + ":2: token of 5000 bytes is over the limit of 1024");
  CHECK_THROWS_WITH(Vocabulary::load("/dev/zero"),
                    "/dev/zero: not a regular file (a character device)");
}

namespace {
// A small corpus with words that share their pieces, as subword learning needs.
std::vector<std::string> subword_texts() {
  const std::vector<std::string> words = {"walk",    "walked", "walking", "talk",    "talked",
                                          "talking", "jump",   "jumped",  "jumping", "the",
                                          "dog",     "dogs",   "cat",     "cats"};
  std::vector<std::string> texts;
  for (size_t i = 0; i < 300; ++i) {
    texts.push_back(words[i % words.size()] + " " + words[(i * 7 + 3) % words.size()] + " " +
                    words[(i * 5 + 1) % words.size()]);
  }
  return texts;
}
}  // namespace

TEST_CASE("subword vocabularies from SentencePiece: BPE and unigram round-trip text", "[data]") {
  const auto texts = subword_texts();
  for (const Level level : {Level::Bpe, Level::Unigram}) {
    INFO(level_name(level));
    const Vocabulary v = Vocabulary::train_subwords(texts, level, 36, "corpus");
    CHECK(v.level() == level);
    CHECK(v.size() == 36);
    CHECK(v.token(Vocabulary::kPad) == "<pad>");
    CHECK(v.token(Vocabulary::kEos) == "<eos>");
    for (const std::string text : {"the dog walked", "cats talking", "jumping the cat"}) {
      const auto ids = v.encode(text);
      CHECK(ids.size() < text.size());  // pieces longer than one character were learned
      CHECK(v.tokenize(text).size() == ids.size());
      for (int64_t id : ids) CHECK((id > Vocabulary::kUnk && id < v.size()));
      CHECK(v.decode(ids) == text);
      std::vector<int64_t> framed = {Vocabulary::kBos};
      framed.insert(framed.end(), ids.begin(), ids.end());
      framed.insert(framed.end(), {Vocabulary::kEos, ids[0]});
      CHECK(v.decode(framed) == text);  // <bos> skipped, nothing after <eos>
    }
    // a character never seen is <unk>, and decodes as SentencePiece's mark for it
    const auto unknown = v.encode("dog zebra");
    CHECK(std::count(unknown.begin(), unknown.end(), Vocabulary::kUnk) > 0);
    // the same texts give the same model
    TempFile a, b;
    v.save(a.path);
    Vocabulary::train_subwords(texts, level, 36, "corpus").save(b.path);
    CHECK(io::read_regular(a.path, 1 << 24) == io::read_regular(b.path, 1 << 24));
    const Vocabulary back = Vocabulary::load(a.path);
    CHECK(back.level() == level);
    REQUIRE(back.size() == v.size());
    for (int64_t i = 0; i < v.size(); ++i) CHECK(back.token(i) == v.token(i));
    CHECK(back.encode("walking dogs") == v.encode("walking dogs"));
  }
  CHECK_THROWS_WITH(Vocabulary::train_subwords(texts, Level::Bpe, 5000, "corpus.tsv"),
                    Catch::Matchers::StartsWith("corpus.tsv: sentencepiece: Vocabulary size too "
                                                "high (5000). Please set it to a value <="));
  CHECK_THROWS_WITH(Vocabulary::train_subwords(texts, Level::Word, 40, "corpus.tsv"),
                    "corpus.tsv: train_subwords takes bpe or unigram, not word");
  CHECK_THROWS_WITH(Vocabulary(Level::Bpe),
                    "a bpe vocabulary is learned (train_subwords) or loaded, not empty");
}

TEST_CASE("a damaged subword vocabulary file is refused before SentencePiece reads it",
          "[data][errors]") {
  TempFile f;
  Vocabulary::train_subwords(subword_texts(), Level::Bpe, 36, "corpus").save(f.path);
  const std::string good = io::read_regular(f.path, 1 << 24);
  const size_t eol = good.find('\n');
  const std::string first = good.substr(0, eol), model = good.substr(eol + 1);
  const std::string bytes = std::to_string(model.size());
  CHECK(first.starts_with("tapegrad-vocab bpe " + bytes + " "));
  std::string flipped = good;
  flipped[eol + 1 + model.size() / 2] ^= 1;
  CHECK_THROWS_WITH(Vocabulary::load(f.write(flipped)),
                    Catch::Matchers::StartsWith(f.path + ": the model's checksum is ") &&
                        Catch::Matchers::EndsWith("the file is damaged"));
  CHECK_THROWS_WITH(Vocabulary::load(f.write(good.substr(0, good.size() - 10))),
                    f.path + ": the model is " + std::to_string(model.size() - 10) +
                        " bytes, the first line says " + bytes);
  CHECK_THROWS_WITH(Vocabulary::load(f.write(good + "x")),
                    f.path + ": bytes after the model's " + bytes);
  for (const std::string line :
       {"tapegrad-vocab bpe", "tapegrad-vocab bpe 12", "tapegrad-vocab bpe -1 0123456789abcdef",
        "tapegrad-vocab bpe 12 0123456789abcdeg"}) {
    CHECK_THROWS_WITH(Vocabulary::load(f.write(line + "\n" + model)),
                      f.path +
                          ":1: expected 'tapegrad-vocab bpe BYTES CHECKSUM' (a byte count, "
                          "16 hex digits)");
  }
  CHECK_THROWS_WITH(
      Vocabulary::load(f.write("tapegrad-vocab unigram 99999999999 0123456789abcdef\n")),
      f.path + ":1: a model of 99999999999 bytes is over the limit of 1073741824");
  // a checksum that agrees with bytes that are no model: SentencePiece's refusal, named
  const std::string junk = "not a model";
  Vocabulary::train_subwords(subword_texts(), Level::Bpe, 36, "corpus").save(f.path);
  const std::string header = fmt::format("tapegrad-vocab bpe {} ", junk.size());
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : junk) h = (h ^ c) * 1099511628211ull;
  CHECK_THROWS_WITH(Vocabulary::load(f.write(header + fmt::format("{:016x}\n", h) + junk)),
                    Catch::Matchers::StartsWith(f.path + ": not a SentencePiece model: "));
}

// A model that passes the checksum is still checked whole: its type against the file's level,
// every piece UTF-8, none repeated.
TEST_CASE("a subword model with a good checksum is still validated piece by piece",
          "[data][errors]") {
  TempFile f;
  Vocabulary::train_subwords(subword_texts(), Level::Bpe, 36, "corpus").save(f.path);
  const std::string good = io::read_regular(f.path, 1 << 24);
  const std::string model = good.substr(good.find('\n') + 1);
  auto with = [&](const std::string& level, const std::string& m) {
    uint64_t h = 14695981039346656037ull;
    for (unsigned char c : m) h = (h ^ c) * 1099511628211ull;
    return f.write(fmt::format("tapegrad-vocab {} {} {:016x}\n", level, m.size(), h) + m);
  };
  CHECK_NOTHROW(Vocabulary::load(with("bpe", model)));
  CHECK_THROWS_WITH(Vocabulary::load(with("unigram", model)),
                    f.path + ": the file says unigram, but the model was trained as type 2 (bpe)");
  // two learned pieces of one length: the second made a copy of the first, or not UTF-8
  const Vocabulary v = Vocabulary::load(with("bpe", model));
  int64_t a = -1, b = -1;
  for (int64_t i = 4; i < v.size() && b < 0; ++i) {
    for (int64_t j = 4; j < i && b < 0; ++j) {
      if (v.token(i).size() == v.token(j).size() && v.token(i).size() >= 2 &&
          model.find(v.token(i)) != std::string::npos) {
        a = j;
        b = i;
      }
    }
  }
  REQUIRE(b > 0);
  std::string repeated = model;
  repeated.replace(model.find(v.token(b)), v.token(b).size(), v.token(a));
  // SentencePiece refuses a repeated piece itself; ours catches one that repeats a special token
  CHECK_THROWS_WITH(Vocabulary::load(with("bpe", repeated)),
                    Catch::Contains(fmt::format("{}: not a SentencePiece model: {} is already "
                                                "defined",
                                                f.path, v.token(a))));
  std::string invalid = model;
  invalid[model.find(v.token(b))] = '\xff';
  CHECK_THROWS_WITH(Vocabulary::load(with("bpe", invalid)),
                    Catch::Contains(fmt::format("{}: piece {} is not valid UTF-8", f.path, b)));
}

TEST_CASE("TSV corpora load and report malformed lines with their line numbers", "[data]") {
  TempFile f;
  const std::string good = "4 March 2025\t2025-03-04\n\nMar 5, 2025\t2025-03-05\r\n";
  const Corpus c = load_tsv(f.write(good));
  REQUIRE(c.examples.size() == 2);
  CHECK(c.examples[1] == Example{"Mar 5, 2025", "2025-03-05"});
  CHECK(c.skipped == 0);

  const std::string bad = "a\tb\nno tab here\nx\ty\tz\n\tempty\nbad \xff byte\tq\n" +
                          std::string(5000, 'x') + "\ty\nc\td\n";
  const Corpus skipped = load_tsv(f.write(bad));
  CHECK(skipped.examples.size() == 2);
  CHECK(skipped.skipped == 5);
  CHECK(skipped.problems ==
        std::vector<std::string>{f.path + ":2: no tab between source and target",
                                 f.path + ":3: 2 tabs; expected one between source and target",
                                 f.path + ":4: empty source or target",
                                 f.path + ":5: invalid UTF-8 at byte 4",
                                 f.path + ":6: line of 5002 bytes exceeds the maximum of 4096"});
  CHECK_THROWS_WITH(load_tsv(f.path, {.strict = true}),
                    f.path + ":2: no tab between source and target");
  CHECK_THROWS_WITH(load_tsv(f.write("")), f.path + ": no valid examples (0 lines, 0 malformed)");
  CHECK_THROWS_WITH(load_tsv(f.write("x\n")),
                    f.path + ": no valid examples (1 lines, 1 malformed)");
  CHECK_THROWS_WITH(load_tsv(f.path + ".missing"),
                    f.path + ".missing: cannot open: No such file or directory");
}

TEST_CASE("an automatic split holds out no source that it trains on", "[data]") {
  // 40 pairs: sources s0 .. s19, each twice with different targets
  Corpus c;
  for (int i = 0; i < 40; ++i) {
    c.examples.push_back({fmt::format("s{}", i % 20), fmt::format("t{}", i)});
    c.lines.push_back(i + 1);
  }
  const CorpusSplit split = split_corpus(c, 4, 7, "pairs.tsv");
  std::set<std::string> trained;
  for (const Example& e : split.train) trained.insert(e.source);
  for (const Example& e : split.valid) CHECK_FALSE(trained.contains(e.source));
  CHECK(split.train.size() == 36);
  CHECK(static_cast<int64_t>(split.valid.size()) + split.overlap == 4);
  CHECK(split.valid_lines.size() == split.valid.size());
  // every source twice and a tenth held out: some held out pair has its twin in training
  CHECK(split.overlap > 0);
  Corpus same;
  for (int i = 0; i < 20; ++i) {
    same.examples.push_back({"x", fmt::format("t{}", i)});
    same.lines.push_back(i + 1);
  }
  CHECK_THROWS_WITH(split_corpus(same, 2, 7, "same.tsv"),
                    "same.tsv: every source held out also occurs among the training pairs (2 "
                    "held out)");
}

TEST_CASE("UTF-8 validation", "[data]") {
  CHECK_FALSE(find_invalid_utf8("plain, é, 日本, 🙂").has_value());
  CHECK(find_invalid_utf8("ab\xc3") == 2u);         // truncated sequence
  CHECK(find_invalid_utf8("\xc0\xaf") == 0u);       // overlong
  CHECK(find_invalid_utf8("x\xed\xa0\x80") == 1u);  // surrogate
  CHECK(split_chars("aé日") == std::vector<std::string>{"a", "é", "日"});
}

TEST_CASE("teacher forcing shifts the target by one and pads", "[data]") {
  const EncodedExample a{{5, 6, 7}, {8, 9}};
  const EncodedExample b{{5}, {8, 9, 10, 11}};
  const Batch batch = make_batch({&a, &b});
  CHECK(batch.src.to_vector<int64_t>() == std::vector<int64_t>{5, 6, 7, 5, 0, 0});
  // <bos>=1, <eos>=2, <pad>=0
  CHECK(batch.tgt_in.to_vector<int64_t>() == std::vector<int64_t>{1, 8, 9, 0, 0, 1, 8, 9, 10, 11});
  CHECK(batch.tgt_out.to_vector<int64_t>() == std::vector<int64_t>{8, 9, 2, 0, 0, 8, 9, 10, 11, 2});
  CHECK(batch.target_tokens == 3 + 5);
  CHECK_THROWS_WITH(make_batch({}), "make_batch: no examples");
  const EncodedExample empty{{}, {8}};
  CHECK_THROWS_WITH(make_batch({&empty}), "make_batch: an example has an empty source");
}

TEST_CASE("make_batches covers every example once, in length buckets", "[data]") {
  std::vector<EncodedExample> examples;
  for (int64_t i = 0; i < 1000; ++i) {
    examples.push_back({std::vector<int64_t>(1 + i % 37, 4), std::vector<int64_t>(1, i)});
  }
  Generator gen(3);
  const auto batches = make_batches(examples, {.rows = 32}, gen);
  std::multiset<int64_t> seen;
  int64_t padded = 0;
  for (const Batch& b : batches) {
    CHECK(b.src.size(0) <= 32);
    for (int64_t i = 0; i < b.tgt_out.size(0); ++i)
      seen.insert(static_cast<int64_t>(b.tgt_out.at({i, 0})));
    for (int64_t v : b.src.to_vector<int64_t>()) padded += v == 0;
  }
  CHECK(seen.size() == 1000);
  CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == 1000);
  CHECK(padded < 1000);  // without bucketing about 17,000 pads
  Generator again(3);
  CHECK(make_batches(examples, {.rows = 32}, again)[0].src.to_vector<int64_t>() ==
        batches[0].src.to_vector<int64_t>());
}

TEST_CASE("make_batches by tokens fills each batch up to the budget", "[data]") {
  std::vector<EncodedExample> examples;  // sources of 1 to 40 tokens, one 300 long
  for (int64_t i = 0; i < 2000; ++i)
    examples.push_back({std::vector<int64_t>(i == 7 ? 300 : 1 + i % 40, 4), {i}});
  Generator gen(5);
  const auto batches = make_batches(examples, {.rows = 1000, .tokens = 256}, gen);
  std::set<int64_t> seen;
  int64_t used = 0;  // the batches' padded tokens
  for (const Batch& b : batches) {
    const int64_t rows = b.src.size(0), longest = std::max(b.src.size(1), b.tgt_out.size(1));
    CHECK((rows * longest <= 256 || rows == 1));  // the long one alone, over the budget
    used += rows * longest;
    for (int64_t i = 0; i < rows; ++i) seen.insert(static_cast<int64_t>(b.tgt_out.at({i, 0})));
  }
  CHECK(seen.size() == 2000);
  CHECK(used > 0.9 * 256 * static_cast<double>(batches.size()));  // batches nearly full
  CHECK(make_batches(examples, {.rows = 10, .tokens = 256}, gen)[0].src.size(0) <= 10);
  CHECK_THROWS_WITH(make_batches(examples, {.rows = 0}, gen),
                    "make_batches: rows must be positive and tokens not negative, got 0 and 0");
}

TEST_CASE("built-in tasks are correct, deterministic and held out", "[data]") {
  CHECK(weekday(2025, 3, 4) == 1);  // a Tuesday
  CHECK(weekday(2000, 1, 1) == 5);  // a Saturday
  CHECK(weekday(1970, 1, 1) == 3);
  CHECK(iso_date(1999, 12, 31) == "1999-12-31");
  const TaskSplit dates = make_task(Task::Dates, 2000, 200, 1);
  CHECK(dates.train.size() == 2000);
  CHECK(dates.valid.size() == 200);
  std::set<std::string> train_sources;
  for (const Example& e : dates.train) train_sources.insert(e.source);
  for (const Example& e : dates.valid) CHECK_FALSE(train_sources.contains(e.source));
  const auto is_iso = [](const std::string& s) {
    for (size_t i = 0; i < s.size(); ++i) {
      if ((i == 4 || i == 7) ? s[i] != '-' : !std::isdigit(static_cast<unsigned char>(s[i])))
        return false;
    }
    return s.size() == 10;
  };
  const std::vector<std::string> months{"january",   "february", "march",    "april",
                                        "may",       "june",     "july",     "august",
                                        "september", "october",  "november", "december"};
  const std::vector<std::string> days{"monday", "tuesday",  "wednesday", "thursday",
                                      "friday", "saturday", "sunday"};
  int checked_weekdays = 0;
  for (const Example& e : dates.train) {
    REQUIRE(is_iso(e.target));
    // "<weekday> the <ordinal> of <month> <year>"
    const std::vector<std::string> w = split_words(e.source);
    if (w.size() == 6 && w[1] == "the" && w[3] == "of") {
      const int y = std::stoi(w[5]), d = std::stoi(w[2]);
      const int mo =
          static_cast<int>(std::find(months.begin(), months.end(), w[4]) - months.begin()) + 1;
      REQUIRE(mo <= 12);
      CHECK(days[weekday(y, mo, d)] == w[0]);
      CHECK(e.target == iso_date(y, mo, d));
      ++checked_weekdays;
    }
    if (e.source.size() == 10 && e.source[2] == '/') {  // day first: dd/mm/yyyy
      CHECK(e.target ==
            e.source.substr(6, 4) + "-" + e.source.substr(3, 2) + "-" + e.source.substr(0, 2));
    }
  }
  CHECK(checked_weekdays > 100);
  CHECK(make_task(Task::Dates, 50, 5, 1).train == make_task(Task::Dates, 50, 5, 1).train);
  const TaskSplit rev = make_task(Task::Reverse, 10, 0, 2);
  for (const Example& e : rev.train)
    CHECK(std::string(e.source.rbegin(), e.source.rend()) == e.target);
  const TaskSplit srt = make_task(Task::Sort, 10, 0, 2);
  for (const Example& e : srt.train) {
    std::string letters = e.target;
    std::erase(letters, ' ');
    CHECK(std::is_sorted(letters.begin(), letters.end()));
  }
  CHECK(task_from_name("dates") == Task::Dates);
  CHECK_FALSE(task_from_name("nope").has_value());
}

TEST_CASE("a task written to TSV reads back the same", "[data]") {
  TempFile f;
  const TaskSplit s = make_task(Task::Dates, 100, 0, 4);
  write_tsv(f.path, s.train);
  CHECK(load_tsv(f.path, {.strict = true}).examples == s.train);
  CHECK_THROWS_WITH(write_tsv(f.path, {{"a\tb", "c"}}),
                    f.path + ": example 'a\tb' contains a tab or newline");
}
