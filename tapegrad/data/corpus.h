// Parallel corpora: pairs of source and target text, read from and written to TSV files
// (source TAB target, one pair a line, UTF-8).
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

// Corpora, vocabularies, the built-in tasks and batches for teacher-forced training.
namespace tapegrad::data {

struct Example {
  std::string source;
  std::string target;
  bool operator==(const Example&) const = default;
};

struct CorpusOptions {
  bool strict = false;           // a malformed line is fatal instead of skipped
  size_t max_line_bytes = 4096;  // longer lines are malformed
};

struct Corpus {
  std::vector<Example> examples;
  std::vector<int64_t> lines;         // the line of the file each example came from
  int64_t skipped = 0;                // malformed lines skipped (never in strict mode)
  std::vector<std::string> problems;  // "file:line: what", one per skipped line
};

// Malformed: no tab, more than one tab, an empty side, invalid UTF-8, a line over the limit.
// Blank lines are ignored. A file with no valid example is an error (DataError) either way,
// and so is anything but a regular file of at most kMaxCorpusBytes.
constexpr uint64_t kMaxCorpusBytes = uint64_t{1} << 30;  // held in memory as strings, twice
Corpus load_tsv(const std::string& path, const CorpusOptions& options = {});
// The same from a stream; `name` stands for the file in messages.
Corpus read_tsv(std::istream& in, const std::string& name, const CorpusOptions& options = {});
// A corpus shuffled (a generator seeded with `seed`) and cut in two: min(max_valid, a tenth)
// examples held out, the rest for training, each with its line in the file. A held-out pair
// whose source also occurs in the training part is dropped (`overlap` counts them): it would
// measure memory, not generalisation. DataError naming the file when not one example can be
// held out.
struct CorpusSplit {
  std::vector<Example> train, valid, test;  // test: only when given as a file of its own
  std::vector<int64_t> train_lines, valid_lines, test_lines;
  int64_t overlap = 0;
};
CorpusSplit split_corpus(const Corpus& corpus, size_t max_valid, uint64_t seed,
                         const std::string& name);

// Sources and targets must not contain tabs or newlines. Atomic (io::write_atomic).
void write_tsv(const std::string& path, const std::vector<Example>& examples);

}  // namespace tapegrad::data
