// make_run_data: the split, the vocabularies, and the pairs that fit the model.
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

// Leaves out of each set of a corpus the pairs that do not fit the model, naming each and
// counting them through `report` (with `strict`, the first is fatal); a generated example that
// does not fit is always fatal: --max-len is too small for the task.
void fit_lengths(const DataOptions& o, RunData& d,
                 const std::function<void(const std::string&)>& report) {
  const std::string held_out_file = o.valid_corpus.empty() ? o.corpus : o.valid_corpus;
  const struct {
    std::vector<data::Example>& set;
    std::vector<int64_t>& lines;
    const std::string& file;
    const char* what;
  } sets[] = {{d.split.train, d.split.train_lines, o.corpus, "training"},
              {d.split.valid, d.split.valid_lines, held_out_file, "held-out"},
              {d.split.test, d.split.test_lines, o.test_corpus, "test"}};
  for (const auto& s : sets) {
    size_t kept = 0;
    for (size_t i = 0; i < s.set.size(); ++i) {
      const std::string problem = length_problem(s.set[i], d, o.max_len);
      if (problem.empty()) {
        if (kept != i) {
          s.set[kept] = std::move(s.set[i]);
          if (!s.lines.empty()) s.lines[kept] = s.lines[i];
        }
        ++kept;
        continue;
      }
      if (s.file.empty()) {
        throw data::DataError(fmt::format("generated {} example {} ('{}'): {}", s.what, i + 1,
                                          s.set[i].source, problem));
      }
      const std::string where = fmt::format("{}:{}: {}", s.file, s.lines[i], problem);
      if (o.strict) throw data::DataError(where);
      if (report) report("skipped " + where);
    }
    const size_t skipped = s.set.size() - kept;
    if (skipped == 0) continue;
    if (kept == 0) {
      throw data::DataError(fmt::format("{}: none of its {} {} pairs fits --max-len {}", s.file,
                                        s.set.size(), s.what, o.max_len));
    }
    if (report) {
      report(fmt::format("{}: {} {} pairs longer than --max-len {} skipped; {} kept", s.file,
                         skipped, s.what, o.max_len, kept));
    }
    s.set.resize(kept);
    if (!s.lines.empty()) s.lines.resize(kept);
  }
}

}  // namespace

RunData make_run_data(const DataOptions& options,
                      const std::function<void(const std::string&)>& report) {
  RunData d;
  d.split = make_split(options, report);
  make_vocabularies(options, d, report);
  fit_lengths(options, d, report);
  return d;
}

}  // namespace tapegrad::train
