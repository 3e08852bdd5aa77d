// classify and tag: the encoder-only heads of seed 002, trained on a small generated task or on
// your own data.
//
//   ./build/examples/classify          # SequenceClassifier: which side has more tokens?
//   ./build/examples/classify --tag    # TokenClassifier: mark every token that occurs twice
//   ./build/examples/classify --data reviews.tsv --level word     # text TAB label
//   ./build/examples/classify --tag --data tagged.tsv             # tokens TAB tags
//
// Sequence task: tokens 4..13 are "positive", 14..23 "negative"; the label says whether a
// sequence has more positive tokens (0), more negative ones (1), or as many of each (2): the
// model has to count over the whole sequence, which the mean over positions allows.
// Tagging task: each token is tagged 1 when the same token occurs elsewhere in its sequence,
// else 0: the tag depends on the other positions, which is what self-attention gives.
// --data reads a TSV file as train --data does (malformed lines skipped and named, or fatal
// with --strict; a tenth held out): text TAB label, or for --tag space-separated tokens TAB
// as many space-separated tags. Labels and tags are the classes, in order of first appearance.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <map>
#include <numeric>

#include "examples/cli.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/data/corpus.h"
#include "tapegrad/data/data_error.h"
#include "tapegrad/data/text.h"
#include "tapegrad/data/vocab.h"
#include "tapegrad/nn/heads.h"
#include "tapegrad/optim/optimizer.h"

using namespace tapegrad;

namespace {

constexpr int64_t kVocab = 24, kPad = data::Vocabulary::kPad, kIgnore = -100;

// One example: token ids and either one label or a tag per token.
struct Sequence {
  std::vector<int64_t> ids, labels;
};

// What the model learns from: examples, the names of the classes, and how to show a sequence.
struct Task {
  std::vector<Sequence> train, held_out;
  std::vector<std::string> classes;
  std::function<std::string(const std::vector<int64_t>&)> show;
  int64_t vocab = 0, max_len = 0;
};

Sequence generated(bool tagging, Generator& gen) {
  Sequence s;
  s.ids.resize(5 + gen.below(8));
  for (int64_t& t : s.ids) t = 4 + static_cast<int64_t>(gen.below(tagging ? 12 : 20));
  if (tagging) {
    std::map<int64_t, int> count;
    for (int64_t t : s.ids) ++count[t];
    for (int64_t t : s.ids) s.labels.push_back(count[t] > 1 ? 1 : 0);
  } else {
    const auto pos = std::count_if(s.ids.begin(), s.ids.end(), [](int64_t t) { return t < 14; });
    const auto neg = static_cast<int64_t>(s.ids.size()) - pos;
    s.labels.push_back(pos > neg ? 0 : pos < neg ? 1 : 2);
  }
  return s;
}

// The generated task: a fresh batch every step, 2000 held-out sequences from another stream.
Task generated_task(bool tagging, int64_t steps, uint64_t seed) {
  Task task;
  Generator gen(seed + 1);
  for (int64_t i = 0; i < steps * 64; ++i) task.train.push_back(generated(tagging, gen));
  Generator held_out(seed + 1000);  // a stream the training batches never drew from
  for (int i = 0; i < 2000; ++i) task.held_out.push_back(generated(tagging, held_out));
  task.classes =
      tagging ? std::vector<std::string>{"0", "1"} : std::vector<std::string>{"0", "1", "2"};
  task.show = [](const std::vector<int64_t>& ids) { return fmt::format("ids {}", ids); };
  task.vocab = kVocab;
  task.max_len = 16;
  return task;
}

// --data: the file read, split, tokenized and labelled, every line checked.
Task data_task(const std::string& path, bool tagging, data::Level level, bool strict,
               int64_t vocab_size, int64_t max_len, uint64_t seed) {
  data::Corpus corpus = data::load_tsv(path, {.strict = strict});
  if (tagging) {  // a tag for every token, or the line is malformed like any other
    data::Corpus kept;
    kept.skipped = corpus.skipped;
    kept.problems = corpus.problems;
    for (size_t i = 0; i < corpus.examples.size(); ++i) {
      const auto tokens = data::split_words(corpus.examples[i].source);
      const auto tags = data::split_words(corpus.examples[i].target);
      if (tokens.size() == tags.size()) {
        kept.examples.push_back(corpus.examples[i]);
        kept.lines.push_back(corpus.lines[i]);
        continue;
      }
      const std::string where = fmt::format("{}:{}: {} tokens but {} tags", path, corpus.lines[i],
                                            tokens.size(), tags.size());
      if (strict) throw data::DataError(where);
      kept.problems.push_back(where);
      ++kept.skipped;
    }
    if (kept.examples.empty()) throw data::DataError(fmt::format("{}: no valid examples", path));
    corpus = std::move(kept);
  }
  for (const std::string& p : corpus.problems) fmt::print(stderr, "skipped {}\n", p);
  if (corpus.skipped > 0) fmt::print(stderr, "{} malformed lines skipped\n", corpus.skipped);
  const data::CorpusSplit split = data::split_corpus(corpus, 500, seed, path);
  std::vector<std::string> texts;
  for (const auto& e : split.train) texts.push_back(e.source);
  auto vocab =
      std::make_shared<data::Vocabulary>(data::Vocabulary::build(texts, level, vocab_size, path));
  Task task;
  std::map<std::string, int64_t> class_ids;
  auto class_of = [&](const std::string& name) {
    const auto [it, added] = class_ids.emplace(name, static_cast<int64_t>(task.classes.size()));
    if (added) task.classes.push_back(name);
    return it->second;
  };
  for (const bool held_out : {false, true}) {
    const auto& examples = held_out ? split.valid : split.train;
    const auto& lines = held_out ? split.valid_lines : split.train_lines;
    for (size_t i = 0; i < examples.size(); ++i) {
      Sequence s;
      s.ids = vocab->encode(examples[i].source);
      if (s.ids.empty() || static_cast<int64_t>(s.ids.size()) > max_len) {
        throw data::DataError(fmt::format("{}:{}: {} tokens; --max-len {} allows 1 to {}", path,
                                          lines[i], s.ids.size(), max_len, max_len));
      }
      if (tagging) {
        for (const std::string& tag : data::split_words(examples[i].target))
          s.labels.push_back(class_of(tag));
      } else {
        s.labels.push_back(class_of(examples[i].target));
      }
      (held_out ? task.held_out : task.train).push_back(std::move(s));
    }
  }
  task.show = [vocab](const std::vector<int64_t>& ids) { return vocab->decode(ids); };
  task.vocab = vocab->size();
  task.max_len = max_len;
  return task;
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

// Fraction of non-ignored labels the logits get right.
double accuracy(const Tensor& logits, const Tensor& labels) {
  const auto predicted = argmax(logits, -1).to_vector<int64_t>();
  const auto expected = labels.to_vector<int64_t>();
  int64_t right = 0, total = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == kIgnore) continue;
    ++total;
    right += predicted[i] == expected[i];
  }
  return static_cast<double>(right) / static_cast<double>(total);
}

// The steps walk through the training examples in batches of 64, reshuffled each epoch.
template <class Model>
int train(Model& model, const Task& task, bool tagging, int64_t steps, double lr, uint64_t seed) {
  optim::Adam adam(model.named_parameters(), {.lr = lr});
  const auto K = static_cast<int64_t>(task.classes.size());
  auto loss_of = [&](const Tensor& logits, const Tensor& labels) {
    return cross_entropy(reshape(logits, {-1, K}), reshape(labels, {-1}),
                         {.ignore_index = kIgnore});
  };
  std::vector<size_t> order(task.train.size());
  std::iota(order.begin(), order.end(), size_t{0});
  Generator shuffle(seed + 2);
  size_t next = order.size();
  for (int64_t step = 1; step <= steps; ++step) {
    std::vector<const Sequence*> members;
    while (members.size() < std::min<size_t>(64, order.size())) {
      if (next == order.size()) {
        for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[shuffle.below(i)]);
        next = 0;
      }
      members.push_back(&task.train[order[next++]]);
    }
    const Batch b = make_batch(members, tagging);
    Tensor loss = loss_of(nn::call(model, b.ids), b.labels);
    loss.backward();
    adam.step();
    adam.zero_grad();
    if (step % 100 == 0) fmt::print("step {:>4}  loss {:.4f}\n", step, loss.item());
  }
  std::vector<const Sequence*> held_out;
  for (const Sequence& s : task.held_out) held_out.push_back(&s);
  const Batch test = make_batch(held_out, tagging);
  model.eval();
  NoGradGuard no_grad;
  const Tensor logits = model.forward(test.ids);
  fmt::print("\nheld-out {} accuracy: {:.2f}% on {} sequences\n", tagging ? "token" : "sequence",
             100 * accuracy(logits, test.labels), held_out.size());
  const auto predicted = argmax(logits, -1).to_vector<int64_t>();
  const auto width = static_cast<size_t>(test.ids.size(1));
  for (size_t b = 0; b < std::min<size_t>(3, held_out.size()); ++b) {
    const Sequence& s = *held_out[b];
    std::vector<std::string> expected, got;
    for (size_t i = 0; i < s.labels.size(); ++i) {
      expected.push_back(task.classes[s.labels[i]]);
      got.push_back(task.classes[predicted[tagging ? b * width + i : b]]);
    }
    fmt::print("  {}\n  expected {}  predicted {}\n", task.show(s.ids), fmt::join(expected, " "),
               fmt::join(got, " "));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("classify", [&] {
    examples::Flags f(argc, argv,
                      "classify: encoder-only sequence classification or token tagging\n"
                      "usage: classify [--tag] [--data FILE.tsv] [flags]");
    const bool tagging = f.boolean("tag", "token tagging instead of sequence classification");
    const std::string data = f.text("data", "",
                                    "a TSV file to learn from instead of the generated task: text "
                                    "TAB label, or with --tag tokens TAB tags");
    const std::string level_text =
        f.text("level", tagging ? "word" : "char",
               "--data's tokens: char, word, bpe or unigram (--tag: word)");
    const int64_t vocab_size = f.integer("vocab-size", 1000, "subword pieces (bpe, unigram)", 5,
                                         data::Vocabulary::kMaxTokens);
    const bool strict =
        f.boolean("strict", "a malformed line in --data is fatal (default: skipped)");
    const int64_t max_len = f.integer("max-len", 128, "longest --data text in tokens", 1, 4096);
    const int64_t steps = f.integer("steps", 800, "training steps", 1, 10'000'000);
    const double lr = f.real("lr", 1e-3, "Adam learning rate", 0, 1);
    const auto seed = static_cast<uint64_t>(f.integer("seed", 0, "seed", 0, INT64_MAX));
    if (!f.finish()) return 0;
    const auto level = data::level_from_name(level_text);
    if (!level) {
      throw examples::FlagError(
          fmt::format("--level: expected char, word, bpe or unigram, got '{}'", level_text));
    }
    if (tagging && *level != data::Level::Word)
      throw examples::FlagError("--tag: tags go with words, so --level is word");
    for (const char* flag : {"level", "vocab-size", "strict", "max-len"}) {
      if (data.empty() && f.given(flag))
        throw examples::FlagError(fmt::format("--{} goes with --data", flag));
    }
    if (f.given("vocab-size") && *level != data::Level::Bpe && *level != data::Level::Unigram)
      throw examples::FlagError("--vocab-size goes with --level bpe or unigram");
    if (lr <= 0) throw examples::FlagError("--lr: must be positive, got 0");
    const Task task = data.empty()
                          ? generated_task(tagging, steps, seed)
                          : data_task(data, tagging, *level, strict, vocab_size, max_len, seed);
    fmt::print("{} training and {} held-out sequences; {} tokens, {} classes\n", task.train.size(),
               task.held_out.size(), task.vocab, task.classes.size());
    const nn::EncoderClassifierConfig cfg{.vocab = task.vocab,
                                          .classes = static_cast<int64_t>(task.classes.size()),
                                          .d_model = 64,
                                          .heads = 4,
                                          .d_ff = 128,
                                          .layers = 2,
                                          .dropout = 0.0,
                                          .max_len = task.max_len,
                                          .pad_id = kPad,
                                          .seed = seed};
    if (tagging) {
      nn::TokenClassifier model(cfg);
      return train(model, task, true, steps, lr, seed);
    }
    nn::SequenceClassifier model(cfg);
    return train(model, task, false, steps, lr, seed);
  });
}
