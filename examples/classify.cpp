// classify and tag: the encoder-only heads of seed 002, trained on a small generated task or on
// your own data, kept in a run folder, and asked about new text.
//
//   ./build/examples/classify          # SequenceClassifier: more positive or negative words?
//   ./build/examples/classify --tag    # TokenClassifier: tag every word that occurs twice
//   ./build/examples/classify --data reviews.tsv --level word --out runs/reviews  # text TAB label
//   ./build/examples/classify --tag --data tagged.tsv             # tokens TAB tags
//   ./build/examples/classify --out runs/reviews --resume --steps 2000
//   ./build/examples/classify --precision bf16    # mixed precision, as train's
//   ./build/examples/classify --run runs/reviews "a fine film" < more_reviews.txt
//
// Sequence task: the words a..j are "positive", k..t "negative"; the label says whether a text
// has more positive words, more negative ones, or as many of each ("even"): the model has to
// count over the whole text, which the mean over positions allows. Tagging task: each word is
// tagged "twice" when the same word occurs elsewhere in its text, else "once": the tag depends
// on the other positions, which is what self-attention gives.
// --data reads a TSV file as train --data does (malformed lines skipped and named, or fatal
// with --strict; a tenth held out, less any text also among the training ones): text TAB label,
// or for --tag space-separated tokens TAB as many space-separated tags. The classes are the
// labels in order of first appearance.
//
// The run folder (tapegrad/train/run.h's protocol: atomic checkpoints, `latest`, the lock, a
// run never written over) holds train.tsv and valid.tsv, loss.tsv, and checkpoints every
// --save-every steps and at the end: config.json, model.safetensors, src.vocab and labels.txt
// (tapegrad/pretrained/classifier.h) with the optimizer and trainer state; --resume continues it
// bit-identically. The held-out set is scored at the end: accuracy, per-class precision, recall
// and F1, their macro averages and the confusion matrix (tapegrad/metrics/classification.h).
// --run DIR predicts a label (or a tag per token) and its probability for each text given as an
// argument, or each line of standard input.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <numeric>
#include <unordered_set>

#include "examples/cli.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/data/corpus.h"
#include "tapegrad/data/data_error.h"
#include "tapegrad/data/text.h"
#include "tapegrad/metrics/classification.h"
#include "tapegrad/pretrained/classifier.h"
#include "tapegrad/train/resume.h"
#include "tapegrad/train/run.h"

using namespace tapegrad;

namespace {

constexpr int64_t kPad = data::Vocabulary::kPad, kIgnore = -100, kBatch = 64;
constexpr size_t kMaxLineBytes = 1 << 16;
constexpr uint64_t kMaxInputBytes = uint64_t{1} << 30;

struct Settings {
  bool tagging = false, strict = false, resume = false, replace = false;
  std::string data, out, run, checkpoint;
  data::Level level = data::Level::Word;
  data::WordOptions words;
  int64_t vocab_size = 0, max_len = 0, steps = 0, save_every = 0, stop_after = 0;
  double lr = 0;
  uint64_t seed = 0;
  Precision precision = Precision::Float32;
  train::RunFlags flags;  // the run's, kept in trainer.json
};

// One example: token ids and either one label or a tag per token.
struct Sequence {
  std::vector<int64_t> ids, labels;
};

// The generated task as text: `count` lines of words TAB label (or tags).
std::vector<data::Example> generated(bool tagging, int64_t count, Generator& gen) {
  std::vector<data::Example> out;
  for (int64_t n = 0; n < count; ++n) {
    std::vector<std::string> words(5 + gen.below(8));
    for (std::string& w : words)
      w = std::string(1, static_cast<char>('a' + gen.below(tagging ? 12 : 20)));
    std::vector<std::string> tags;
    for (const std::string& w : words)
      tags.push_back(std::count(words.begin(), words.end(), w) > 1 ? "twice" : "once");
    const auto pos =
        std::count_if(words.begin(), words.end(), [](const std::string& w) { return w[0] < 'k'; });
    const auto neg = static_cast<int64_t>(words.size()) - pos;
    out.push_back(
        {fmt::format("{}", fmt::join(words, " ")), tagging ? fmt::format("{}", fmt::join(tags, " "))
                                                   : pos > neg ? "positive"
                                                   : pos < neg ? "negative"
                                                               : "even"});
  }
  return out;
}

// The generated task: 20,000 training and 2,000 held-out texts, from two streams.
data::CorpusSplit generated_split(const Settings& s) {
  data::CorpusSplit split;
  Generator train(s.seed + 1), held_out(s.seed + 1000);
  split.train = generated(s.tagging, 20000, train);
  split.valid = generated(s.tagging, 2000, held_out);
  return split;
}

// --data read, each tagged line checked to have a tag per token (or skipped, as a malformed
// line is), and split.
data::CorpusSplit read_data(const Settings& s) {
  data::Corpus corpus = data::load_tsv(s.data, {.strict = s.strict});
  data::Corpus kept;
  kept.skipped = corpus.skipped;
  kept.problems = corpus.problems;
  for (size_t i = 0; i < corpus.examples.size(); ++i) {
    const size_t tokens = data::split_words(corpus.examples[i].source).size();
    const size_t tags = data::split_words(corpus.examples[i].target).size();
    if (!s.tagging || tokens == tags) {
      kept.examples.push_back(corpus.examples[i]);
      kept.lines.push_back(corpus.lines[i]);
      continue;
    }
    const std::string where =
        fmt::format("{}:{}: {} tokens but {} tags", s.data, corpus.lines[i], tokens, tags);
    if (s.strict) throw data::DataError(where);
    kept.problems.push_back(where);
    ++kept.skipped;
  }
  if (kept.examples.empty()) throw data::DataError(fmt::format("{}: no valid examples", s.data));
  for (const std::string& p : kept.problems) fmt::print(stderr, "skipped {}\n", p);
  if (kept.skipped > 0) fmt::print(stderr, "{} malformed lines skipped\n", kept.skipped);
  return data::split_corpus(kept, 500, s.seed, s.data);
}

// The classes of the split's labels (or tags), in order of first appearance; more than
// metrics::kMaxClasses is a DataError naming `file`.
std::vector<std::string> classes_of(const data::CorpusSplit& split, const std::string& file) {
  std::vector<std::string> classes;
  std::unordered_set<std::string> seen;
  for (const auto* part : {&split.train, &split.valid}) {
    for (const data::Example& e : *part) {
      for (const std::string& c : data::split_words(e.target)) {
        if (!seen.insert(c).second) continue;
        if (std::ssize(classes) == metrics::kMaxClasses) {
          throw data::DataError(
              fmt::format("{}: more than {} distinct labels, the most a classifier here has", file,
                          metrics::kMaxClasses));
        }
        classes.push_back(c);
      }
    }
  }
  return classes;
}

// `examples` as ids and class ids; `file` and `lines` name an example that does not fit.
std::vector<Sequence> encode(const std::vector<data::Example>& examples,
                             const data::Vocabulary& vocab, const std::vector<std::string>& classes,
                             int64_t max_len, const std::string& file) {
  std::map<std::string, int64_t> class_ids;
  for (size_t k = 0; k < classes.size(); ++k) class_ids[classes[k]] = static_cast<int64_t>(k);
  std::vector<Sequence> out;
  for (size_t i = 0; i < examples.size(); ++i) {
    Sequence s;
    s.ids = vocab.encode(examples[i].source);
    if (s.ids.empty() || static_cast<int64_t>(s.ids.size()) > max_len) {
      throw data::DataError(fmt::format("{}: example {}: {} tokens; --max-len {} allows 1 to {}",
                                        file, i + 1, s.ids.size(), max_len, max_len));
    }
    for (const std::string& c : data::split_words(examples[i].target)) {
      const auto it = class_ids.find(c);
      if (it == class_ids.end())
        throw data::DataError(fmt::format("{}: example {}: class '{}' is not one of the run's",
                                          file, i + 1, c.substr(0, 40)));
      s.labels.push_back(it->second);
    }
    out.push_back(std::move(s));
  }
  return out;
}

struct Batch {
  Tensor ids;     // [B, S]
  Tensor labels;  // [B] (sequence task) or [B, S] with kIgnore at padding (tagging task)
};

Batch make_batch(const std::vector<const Sequence*>& members, bool tagging) {
  const auto B = static_cast<int64_t>(members.size());
  size_t S = 0;
  for (const Sequence* s : members) S = std::max(S, s->ids.size());
  std::vector<int64_t> ids(B * S, kPad), labels;
  for (int64_t b = 0; b < B; ++b) {
    const Sequence& s = *members[b];
    std::copy(s.ids.begin(), s.ids.end(), ids.begin() + b * static_cast<int64_t>(S));
    if (!tagging) labels.push_back(s.labels[0]);
    for (size_t i = 0; tagging && i < S; ++i)
      labels.push_back(i < s.ids.size() ? s.labels[i] : kIgnore);
  }
  const auto Sl = static_cast<int64_t>(S);
  return {from_vector(ids, {B, Sl}),
          tagging ? from_vector(labels, {B, Sl}) : from_vector(labels, {B})};
}

}  // namespace

namespace {

// A classifier's run: the model with its vocabulary and classes, the data, the optimizer, the
// order the examples are drawn in, and the run folder that keeps them.
struct Run {
  PretrainedClassifier c;
  std::vector<Sequence> train, valid;
  std::unique_ptr<optim::Adam> adam;
  Generator shuffle{0}, epoch_start{0};  // an epoch's order is drawn from epoch_start
  std::vector<size_t> order;
  size_t next = 0;  // the next example of the order
  std::optional<train::RunDirectory> dir;
  std::unique_ptr<io::AppendFile> loss_log;

  void new_epoch() {
    epoch_start = shuffle;
    order.resize(train.size());
    std::iota(order.begin(), order.end(), size_t{0});
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[shuffle.below(i)]);
    next = 0;
  }
};

// The model and optimizer of a new run on `split`; its files written in the run folder.
void begin(Run& r, const Settings& s, const data::CorpusSplit& split) {
  const std::string file = s.data.empty() ? "the generated task" : s.data;
  r.c.classes = classes_of(split, file);
  std::vector<std::string> texts;
  for (const auto& e : split.train) texts.push_back(e.source);
  r.c.vocab = data::Vocabulary::build(texts, s.level, s.vocab_size, file, s.words);
  r.train = encode(split.train, r.c.vocab, r.c.classes, s.max_len, file + " (training part)");
  r.valid = encode(split.valid, r.c.vocab, r.c.classes, s.max_len, file + " (held-out part)");
  const nn::EncoderClassifierConfig cfg{.vocab = r.c.vocab.size(),
                                        .classes = static_cast<int64_t>(r.c.classes.size()),
                                        .d_model = 64,
                                        .heads = 4,
                                        .d_ff = 128,
                                        .layers = 2,
                                        .dropout = 0.0,
                                        .max_len = s.max_len,
                                        .pad_id = kPad,
                                        .seed = s.seed};
  if (s.tagging) {
    r.c.tokens = std::make_unique<nn::TokenClassifier>(cfg);
  } else {
    r.c.sequence = std::make_unique<nn::SequenceClassifier>(cfg);
  }
  r.dir.emplace(s.out, s.replace ? train::Start::Replace : train::Start::New,
                s.data.empty() ? std::vector<std::string>{} : std::vector<std::string>{s.data});
  data::write_tsv(r.dir->file("train.tsv"), split.train);
  data::write_tsv(r.dir->file("valid.tsv"), split.valid);
  r.adam =
      std::make_unique<optim::Adam>(r.c.model().named_parameters(), optim::AdamOptions{.lr = s.lr});
  r.shuffle = Generator(s.seed + 2);
  r.new_epoch();
  r.loss_log = train::open_log(r.dir->file("loss.tsv"), false, -1, 0);
}

// The run in s.out at its newest checkpoint: model, optimizer, order and log as they were.
void resume(Run& r, const Settings& s) {
  r.dir.emplace(s.out, train::Start::Resume, std::vector<std::string>{});
  const std::string ckpt = train::latest_checkpoint(s.out);
  r.c = load_classifier(ckpt);
  const train::TrainerState state = train::RunDirectory::resume_state(
      s.out, ckpt, train::metadata_step(r.c.metadata, ckpt + "/model.safetensors"));
  r.c.model().train();
  r.adam =
      std::make_unique<optim::Adam>(r.c.model().named_parameters(), optim::AdamOptions{.lr = s.lr});
  train::RunDirectory::resume_optimizer(*r.adam, ckpt, state.step);
  train::restore_generators(state.generators, ckpt, r.shuffle, r.c.model());
  r.loss_log = train::open_log(r.dir->file("loss.tsv"), true, state.loss_log_bytes, state.step,
                               true, ckpt + "/trainer.json's 'loss_log_bytes'");
  const auto split_part = [&](const char* name) {
    return data::load_tsv(r.dir->file(name), {.strict = true}).examples;
  };
  r.train = encode(split_part("train.tsv"), r.c.vocab, r.c.classes, s.max_len, "train.tsv");
  r.valid = encode(split_part("valid.tsv"), r.c.vocab, r.c.classes, s.max_len, "valid.tsv");
  r.new_epoch();
  if (state.epoch_index > static_cast<int64_t>(r.order.size()) || state.epoch_index == 0)
    throw train::RunError(
        fmt::format("{}/trainer.json: 'epoch_index' {} is not an example from 1 to the {} of "
                    "train.tsv",
                    ckpt, state.epoch_index, r.order.size()));
  r.next = static_cast<size_t>(state.epoch_index);
}

void checkpoint(Run& r, const Settings& s) {
  const int64_t step = r.adam->step_count();
  r.loss_log->sync();
  const auto save = [&](const std::string& folder) {
    save_classifier(folder, r.c.model(), s.tagging, r.c.vocab, r.c.classes,
                    {{"step", std::to_string(step)}});
  };
  r.dir->commit(r.c.model().state(), save, *r.adam,
                {.step = step,
                 .epoch_index = static_cast<int64_t>(r.next),
                 .loss_log_bytes = static_cast<int64_t>(r.loss_log->size()),
                 .generators = train::generator_states(r.epoch_start, r.c.model()),
                 .flags = s.flags,
                 .best = {}});
}

// One step on the next batch of the order (a new epoch's order drawn when it runs out), its
// products in `precision`.
double step(Run& r, bool tagging, Precision precision) {
  std::vector<const Sequence*> members;
  while (members.size() < std::min<size_t>(kBatch, r.train.size())) {
    if (r.next == r.order.size()) r.new_epoch();
    members.push_back(&r.train[r.order[r.next++]]);
  }
  const Batch b = make_batch(members, tagging);
  const auto K = static_cast<int64_t>(r.c.classes.size());
  const AutocastGuard autocast(precision);
  Tensor loss = cross_entropy(reshape(r.c.logits(b.ids), {-1, K}), reshape(b.labels, {-1}),
                              {.ignore_index = kIgnore});
  loss.backward();
  r.adam->step();
  r.adam->zero_grad();
  r.loss_log->write(fmt::format("{}\t{:.9g}\n", r.adam->step_count(), loss.item()));
  return loss.item();
}

// The held-out set scored, its products in `precision`: accuracy, per-class and macro F1, the
// confusion matrix.
void evaluate(Run& r, bool tagging, Precision precision) {
  NoGradGuard no_grad;
  const AutocastGuard autocast(precision);
  r.c.model().eval();
  std::vector<int64_t> expected, predicted;
  for (size_t start = 0; start < r.valid.size(); start += 256) {
    std::vector<const Sequence*> members;
    for (size_t i = start; i < std::min(r.valid.size(), start + 256); ++i)
      members.push_back(&r.valid[i]);
    const Batch b = make_batch(members, tagging);
    const auto got = argmax(r.c.logits(b.ids), -1).to_vector<int64_t>();
    const auto want = b.labels.to_vector<int64_t>();
    for (size_t i = 0; i < want.size(); ++i) {
      if (want[i] == kIgnore) continue;
      expected.push_back(want[i]);
      predicted.push_back(got[i]);
    }
  }
  r.c.model().train();
  const metrics::Classification m =
      metrics::classification(expected, predicted, static_cast<int64_t>(r.c.classes.size()));
  fmt::print("\nheld-out {} accuracy {:.2f}%, macro F1 {:.4f} ({} {})\n\n{}",
             tagging ? "token" : "sequence", 100 * m.accuracy, m.macro_f1, expected.size(),
             tagging ? "tokens" : "sequences", m.table(r.c.classes));
}

}  // namespace

namespace {

// Trains a new or resumed run to s.steps (or s.stop_after steps of this invocation),
// checkpointing on the way and at the end, then scores the held-out set.
int train_run(const Settings& s) {
  Run r;
  if (s.resume) {
    resume(r, s);
    fmt::print("resumed {} at step {}\n", s.out, r.adam->step_count());
  } else {
    begin(r, s, s.data.empty() ? generated_split(s) : read_data(s));
  }
  fmt::print("{} training and {} held-out sequences; {} tokens, {} classes; run in {}\n",
             r.train.size(), r.valid.size(), r.c.vocab.size(), r.c.classes.size(), s.out);
  const int64_t first = r.adam->step_count() + 1;
  for (int64_t step = first; step <= s.steps; ++step) {
    const double loss = ::step(r, s.tagging, s.precision);
    if (step % 100 == 0) fmt::print("step {:>4}  loss {:.4f}\n", step, loss);
    if (s.save_every > 0 && step % s.save_every == 0) checkpoint(r, s);
    if (s.stop_after > 0 && step - first + 1 == s.stop_after && step < s.steps) {
      checkpoint(r, s);
      fmt::print("stopped at step {}: saved {}; continue with --resume\n", step, s.out);
      return 0;
    }
  }
  checkpoint(r, s);
  evaluate(r, s.tagging, s.precision);
  fmt::print("\nmodel, vocabulary and labels in {}/ (classify --run {} TEXT)\n", s.out, s.out);
  return 0;
}

// --run: each text's label (or tags) and probability, a line each; a text that cannot be
// classified gets an empty line and an error naming it, and the exit code is 1.
int predict(const Settings& s, const std::vector<std::string>& arguments) {
  const PretrainedClassifier c = load_classifier(train::checkpoint_folder(s.run, s.checkpoint));
  int failures = 0;
  const auto classify = [&](const std::string& text, const std::string& where) {
    PretrainedClassifier::Prediction got;
    try {
      got = c.predict(text);
    } catch (const Error& e) {
      fmt::print("\n");
      fmt::print(stderr, "classify: {}: {}\n", where, e.what());
      ++failures;
      return;
    }
    std::vector<std::string> values;
    for (const float p : got.probabilities) values.push_back(fmt::format("{:.4f}", p));
    fmt::print("{}\t{}\n", fmt::join(got.labels, " "), fmt::join(values, " "));
  };
  for (size_t i = 0; i < arguments.size(); ++i)
    classify(arguments[i], fmt::format("argument {}", i + 1));
  if (arguments.empty()) {
    data::LineReader reader(std::cin, "stdin", kMaxLineBytes, kMaxInputBytes);
    while (const auto line = reader.next()) classify(*line, reader.where());
  }
  if (failures > 0) fmt::print(stderr, "classify: {} text(s) could not be classified\n", failures);
  return failures > 0 ? 1 : 0;
}

}  // namespace

namespace {

// The flags of one invocation alone; the others are the run's, kept with its checkpoints.
const std::set<std::string> kPerInvocation = {"out",        "resume", "replace",   "stop-after",
                                              "save-every", "run",    "checkpoint"};

// --run, --checkpoint, --resume, --replace and --out; with --resume the run's saved flags become
// the defaults of the flags read after.
void read_run_flags(examples::Flags& f, Settings& s) {
  s.run = f.text("run", "", "predict with this run (or checkpoint) folder instead of training");
  s.checkpoint = f.text("checkpoint", "latest", "with --run: latest, or a step the run keeps");
  s.resume = f.boolean("resume", "continue the run saved in --out, with its saved flags");
  s.replace = f.boolean("replace",
                        "train a new run in place of the one in --out (the old one "
                        "is kept until the new one saves its first checkpoint)");
  const std::string base =
      "runs/" + (f.peek("data")  ? std::filesystem::path(*f.peek("data")).stem().string()
                 : f.peek("tag") ? std::string("tag")
                                 : std::string("classify"));
  s.out = f.text("out", base,
                 "the run folder (default: runs/<classify, tag or the data's name>, "
                 "numbered -2, -3, ... past the ones that exist)");
  if (!f.given("out") && !s.resume && !s.replace) s.out = examples::unused_folder(s.out);
  if (s.resume && !f.peek("help")) {
    const std::string checkpoint = train::latest_checkpoint(s.out);
    f.fallback(train::read_trainer_state(checkpoint).flags, checkpoint + "/trainer.json");
  }
}

void read_training_flags(examples::Flags& f, Settings& s) {
  s.tagging = f.boolean("tag", "token tagging instead of sequence classification");
  s.data = f.text("data", "",
                  "a TSV file to learn from instead of the generated task: text TAB label, or "
                  "with --tag tokens TAB tags");
  const std::string level =
      f.text("level", "word", "--data's tokens: char, word, bpe or unigram (--tag: word)");
  s.vocab_size = f.integer("vocab-size", 1000, "subword pieces (bpe, unigram)", 5,
                           data::Vocabulary::kMaxTokens);
  s.strict = f.boolean("strict", "a malformed line in --data is fatal (default: skipped)");
  s.words.lowercase = f.boolean("lowercase", "--level word: lower-case the text first");
  s.words.split_punctuation =
      f.boolean("split-punctuation", "--level word: punctuation marks are tokens of their own");
  s.max_len = f.integer("max-len", 128, "longest text in tokens", 1, 4096);
  s.steps = f.integer("steps", 800, "training steps in all", 1, 10'000'000);
  s.save_every =
      f.integer("save-every", 200, "steps between checkpoints (0: only at the end)", 0, 10'000'000);
  s.stop_after = f.integer("stop-after", 0,
                           "stop after this many steps of this invocation, saving a run to "
                           "--resume (0: never)",
                           0, 10'000'000);
  s.lr = f.real("lr", 1e-3, "Adam learning rate", 0, 1);
  s.seed = static_cast<uint64_t>(f.integer("seed", 0, "seed", 0, INT64_MAX));
  s.precision = examples::read_precision(f);
  const auto parsed = data::level_from_name(level);
  if (!parsed)
    throw examples::FlagError(
        fmt::format("--level: expected char, word, bpe or unigram, got '{}'", level));
  s.level = *parsed;
}

// The flags as a whole: what goes with what.
void check_combinations(const examples::Flags& f, const Settings& s) {
  if (s.tagging && s.level != data::Level::Word)
    throw examples::FlagError("--tag: tags go with words, so --level is word");
  if (s.tagging && s.words.split_punctuation)
    throw examples::FlagError("--split-punctuation: --tag takes a tag per space-separated token");
  for (const char* flag : {"lowercase", "split-punctuation"}) {
    if (f.given(flag) && s.level != data::Level::Word)
      throw examples::FlagError(fmt::format("--{} goes with --level word", flag));
  }
  for (const char* flag : {"level", "vocab-size", "strict", "lowercase", "split-punctuation"}) {
    if (s.data.empty() && f.given(flag))
      throw examples::FlagError(fmt::format("--{} goes with --data", flag));
  }
  if (f.given("vocab-size") && s.level != data::Level::Bpe && s.level != data::Level::Unigram)
    throw examples::FlagError("--vocab-size goes with --level bpe or unigram");
  if (s.lr <= 0) throw examples::FlagError("--lr: must be positive, got 0");
  if (s.resume && s.replace) throw examples::FlagError("--replace and --resume exclude each other");
  if (s.run.empty()) {
    if (f.given("checkpoint")) throw examples::FlagError("--checkpoint goes with --run");
    if (!f.positional().empty())
      throw examples::FlagError("texts to classify go with --run (a trained run)");
    return;
  }
  for (const auto& [name, value] : f.read()) {
    if (name != "run" && name != "checkpoint" && f.given(name))
      throw examples::FlagError(fmt::format("--{} trains a run; --run only predicts", name));
  }
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("classify", [&] {
    examples::Flags f(argc, argv,
                      "classify: encoder-only sequence classification or token tagging\n"
                      "usage: classify [--tag] [--data FILE.tsv] [--out DIR] [flags]\n"
                      "       classify --run DIR [TEXT ...]  (standard input when no TEXT)");
    f.takes_arguments();
    Settings s;
    read_run_flags(f, s);
    read_training_flags(f, s);
    if (!f.finish()) return 0;
    check_combinations(f, s);
    if (!s.run.empty()) return predict(s, f.positional());
    for (const auto& [name, value] : f.read()) {
      if (!kPerInvocation.contains(name)) s.flags[name] = value;
    }
    if (s.resume) {
      try {
        train::check_resume_flags(s.out,
                                  train::read_trainer_state(train::latest_checkpoint(s.out)).flags,
                                  s.flags, false);
      } catch (const train::ResumeConflict& e) {
        throw examples::FlagError(e.what());
      }
    }
    return train_run(s);
  });
}
