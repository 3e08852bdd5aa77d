// TSV corpora: reading line by line with a bound on each line (malformed lines skipped or
// fatal, each named by file and line) and writing atomically.
#include "tapegrad/data/corpus.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include "tapegrad/autograd/random.h"
#include "tapegrad/data/data_error.h"
#include "tapegrad/data/text.h"
#include "tapegrad/io/files.h"

namespace tapegrad::data {

namespace {
// What is wrong with the line, or "" when it is a good example.
std::string check_line(const std::string& line, size_t length, const CorpusOptions& options) {
  if (length > options.max_line_bytes) {
    return fmt::format("line of {} bytes exceeds the maximum of {}", length,
                       options.max_line_bytes);
  }
  if (const auto bad = find_invalid_utf8(line))
    return fmt::format("invalid UTF-8 at byte {}", *bad);
  const auto tabs = std::count(line.begin(), line.end(), '\t');
  if (tabs == 0) return "no tab between source and target";
  if (tabs > 1) return fmt::format("{} tabs; expected one between source and target", tabs);
  const size_t tab = line.find('\t');
  if (tab == 0 || tab + 1 == line.size()) return "empty source or target";
  return "";
}
}  // namespace

Corpus load_tsv(const std::string& path, const CorpusOptions& options) {
  try {
    io::OpenedFile f = io::open_regular(path, kMaxCorpusBytes);
    return read_tsv(f.stream, path, options);
  } catch (const io::FileError& e) {
    throw DataError(e.what());
  }
}

Corpus read_tsv(std::istream& in, const std::string& path, const CorpusOptions& options) {
  Corpus corpus;
  std::string line;
  int64_t line_no = 0;
  while (const auto read = read_line(in, line, options.max_line_bytes + 1)) {
    ++line_no;
    size_t length = *read;
    if (!line.empty() && line.back() == '\r' && length == line.size()) {  // CRLF files
      line.pop_back();
      --length;
    }
    if (length == 0) continue;
    const std::string problem = check_line(line, length, options);
    if (!problem.empty()) {
      const std::string where = fmt::format("{}:{}: {}", path, line_no, problem);
      if (options.strict) throw DataError(where);
      corpus.problems.push_back(where);
      ++corpus.skipped;
      continue;
    }
    const size_t tab = line.find('\t');
    corpus.examples.push_back({line.substr(0, tab), line.substr(tab + 1)});
    corpus.lines.push_back(line_no);
  }
  if (corpus.examples.empty()) {
    throw DataError(fmt::format("{}: no valid examples ({} lines, {} malformed)", path, line_no,
                                corpus.skipped));
  }
  return corpus;
}

CorpusSplit split_corpus(const Corpus& corpus, size_t max_valid, uint64_t seed,
                         const std::string& name) {
  std::vector<size_t> order(corpus.examples.size());
  std::iota(order.begin(), order.end(), size_t{0});
  Generator gen(seed);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[gen.below(i)]);
  const size_t n_valid = std::min(max_valid, order.size() / 10);
  if (n_valid == 0) {
    throw DataError(fmt::format("{}: too few examples ({}) to hold any out", name, order.size()));
  }
  CorpusSplit split;
  std::unordered_set<std::string> trained;
  for (size_t k = 0; k + n_valid < order.size(); ++k) {
    split.train.push_back(corpus.examples[order[k]]);
    split.train_lines.push_back(corpus.lines[order[k]]);
    trained.insert(corpus.examples[order[k]].source);
  }
  for (size_t k = order.size() - n_valid; k < order.size(); ++k) {
    if (trained.contains(corpus.examples[order[k]].source)) {
      ++split.overlap;
      continue;
    }
    split.valid.push_back(corpus.examples[order[k]]);
    split.valid_lines.push_back(corpus.lines[order[k]]);
  }
  if (split.valid.empty()) {
    throw DataError(
        fmt::format("{}: every source held out also occurs among the training pairs ({} held out)",
                    name, n_valid));
  }
  return split;
}

void write_tsv(const std::string& path, const std::vector<Example>& examples) {
  std::string text;
  for (const Example& e : examples) {
    for (const std::string* s : {&e.source, &e.target}) {
      if (s->find_first_of("\t\n") != std::string::npos) {
        throw DataError(fmt::format("{}: example '{}' contains a tab or newline", path, *s));
      }
    }
    text += e.source + '\t' + e.target + '\n';
  }
  try {
    io::write_atomic(path, text);
  } catch (const io::FileError& e) {
    throw DataError(e.what());
  }
}

}  // namespace tapegrad::data
