// make_run_data: the split, the vocabularies, and the length check of every example.
#include "tapegrad/train/run_data.h"

#include <fmt/core.h>

#include "tapegrad/data/data_error.h"
#include "tapegrad/data/tasks.h"

namespace tapegrad::train {

namespace {

data::CorpusSplit make_split(const DataOptions& o,
                             const std::function<void(const std::string&)>& report) {
  if (o.corpus.empty()) {
    const auto task = data::task_from_name(o.task);
    TG_CHECK(task, "make_run_data: unknown task '{}' (dates, copy, reverse, sort)", o.task);
    data::TaskSplit generated = data::make_task(*task, o.train_size, o.valid_size, o.seed);
    data::CorpusSplit split;
    split.train = std::move(generated.train);
    split.valid = std::move(generated.valid);
    return split;
  }
  const auto load = [&](const std::string& path) {
    data::Corpus corpus = data::load_tsv(path, {.strict = o.strict});
    if (report) {
      for (const std::string& p : corpus.problems) report("skipped " + p);
      if (corpus.skipped > 0)
        report(fmt::format("{}: {} malformed lines skipped", path, corpus.skipped));
    }
    return corpus;
  };
  data::Corpus corpus = load(o.corpus);
  data::CorpusSplit split;
  if (o.valid_corpus.empty()) {
    split = data::split_corpus(corpus, static_cast<size_t>(o.valid_size), o.seed, o.corpus);
    if (report && split.overlap > 0) {
      report(
          fmt::format("{}: dropped {} of the pairs held out, whose source also occurs among the "
                      "training pairs; {} held out",
                      o.corpus, split.overlap, split.valid.size()));
    }
  } else {
    split.train = std::move(corpus.examples);
    split.train_lines = std::move(corpus.lines);
    data::Corpus valid = load(o.valid_corpus);
    split.valid = std::move(valid.examples);
    split.valid_lines = std::move(valid.lines);
  }
  if (!o.test_corpus.empty()) {
    data::Corpus test = load(o.test_corpus);
    split.test = std::move(test.examples);
    split.test_lines = std::move(test.lines);
  }
  return split;
}

void make_vocabularies(const DataOptions& o, RunData& d,
                       const std::function<void(const std::string&)>& report) {
  const std::string name = o.corpus.empty() ? "the task " + o.task : o.corpus;
  std::vector<std::string> sources, targets;
  for (const auto& e : d.split.train) {
    sources.push_back(e.source);
    targets.push_back(e.target);
  }
  auto make = [&](const std::vector<std::string>& texts, const char* side) {
    const std::string what = fmt::format("{} ({})", name, side);
    try {
      return data::Vocabulary::build(texts, o.level, o.vocab_size, what, o.words);
    } catch (const data::VocabularySizeError& e) {
      if (!o.fit_vocab_size) throw;
      if (report) {
        report(fmt::format("{}: {} subword pieces are more than it holds; using {}", what,
                           o.vocab_size, e.largest));
      }
      return data::Vocabulary::build(texts, o.level, e.largest, what, o.words);
    }
  };
  if (o.shared_vocab) {
    sources.insert(sources.end(), targets.begin(), targets.end());
    d.src_vocab = d.tgt_vocab = make(sources, "both sides");
    return;
  }
  d.src_vocab = make(sources, "source side");
  d.tgt_vocab = make(targets, "target side");
}

// The length problem of an example, or "" when source and target fit the model (the target
// with its <eos>).
std::string length_problem(const data::Example& e, const RunData& d, int64_t max_len) {
  const auto src = static_cast<int64_t>(d.src_vocab.encode(e.source).size());
  const auto tgt = static_cast<int64_t>(d.tgt_vocab.encode(e.target).size());
  if (src == 0 || tgt == 0) return "empty source or target";
  if (src > max_len || tgt + 1 > max_len) {
    return fmt::format("{} source and {} target tokens; --max-len {} allows {} and {}", src, tgt,
                       max_len, max_len, max_len - 1);
  }
  return "";
}

void check_lengths(const DataOptions& o, const RunData& d) {
  const std::string held_out_file = o.valid_corpus.empty() ? o.corpus : o.valid_corpus;
  const struct {
    const std::vector<data::Example>& set;
    const std::vector<int64_t>& lines;
    const std::string& file;
    const char* what;
  } sets[] = {{d.split.train, d.split.train_lines, o.corpus, "training"},
              {d.split.valid, d.split.valid_lines, held_out_file, "held-out"},
              {d.split.test, d.split.test_lines, o.test_corpus, "test"}};
  for (const auto& s : sets) {
    for (size_t i = 0; i < s.set.size(); ++i) {
      const std::string problem = length_problem(s.set[i], d, o.max_len);
      if (problem.empty()) continue;
      if (!s.file.empty())
        throw data::DataError(fmt::format("{}:{}: {}", s.file, s.lines[i], problem));
      throw data::DataError(fmt::format("generated {} example {} ('{}'): {}", s.what, i + 1,
                                        s.set[i].source, problem));
    }
  }
}

}  // namespace

RunData make_run_data(const DataOptions& options,
                      const std::function<void(const std::string&)>& report) {
  RunData d;
  d.split = make_split(options, report);
  make_vocabularies(options, d, report);
  check_lengths(options, d);
  return d;
}

}  // namespace tapegrad::train
