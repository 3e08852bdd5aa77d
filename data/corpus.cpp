#include "data/corpus.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "data/error.h"
#include "data/text.h"

namespace tapegrad::data {

namespace {
// What is wrong with the line, or "" when it is a good example.
std::string check_line(const std::string& line, const CorpusOptions& options) {
  if (line.size() > options.max_line_bytes) {
    return fmt::format("line of {} bytes exceeds the maximum of {}", line.size(),
                       options.max_line_bytes);
  }
  if (const auto bad = find_invalid_utf8(line)) return fmt::format("invalid UTF-8 at byte {}", *bad);
  const auto tabs = std::count(line.begin(), line.end(), '\t');
  if (tabs == 0) return "no tab between source and target";
  if (tabs > 1) return fmt::format("{} tabs; expected one between source and target", tabs);
  const size_t tab = line.find('\t');
  if (tab == 0 || tab + 1 == line.size()) return "empty source or target";
  return "";
}
}  // namespace

Corpus load_tsv(const std::string& path, const CorpusOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(fmt::format("{}: cannot open", path));
  Corpus corpus;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files
    if (line.empty()) continue;
    const std::string problem = check_line(line, options);
    if (!problem.empty()) {
      const std::string where = fmt::format("{}:{}: {}", path, line_no, problem);
      if (options.strict) throw DataError(where);
      corpus.problems.push_back(where);
      ++corpus.skipped;
      continue;
    }
    const size_t tab = line.find('\t');
    corpus.examples.push_back({line.substr(0, tab), line.substr(tab + 1)});
  }
  if (corpus.examples.empty()) {
    throw DataError(fmt::format("{}: no valid examples ({} lines, {} malformed)", path, line_no,
                                corpus.skipped));
  }
  return corpus;
}

void write_tsv(const std::string& path, const std::vector<Example>& examples) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw DataError(fmt::format("{}: cannot create", path));
  for (const Example& e : examples) {
    for (const std::string* s : {&e.source, &e.target}) {
      if (s->find_first_of("\t\n") != std::string::npos) {
        throw DataError(fmt::format("{}: example '{}' contains a tab or newline", path, *s));
      }
    }
    out << e.source << '\t' << e.target << '\n';
  }
  if (!out.flush()) throw DataError(fmt::format("{}: write failed", path));
}

}  // namespace tapegrad::data
