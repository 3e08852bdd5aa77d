// A new run's data: its split (a built-in task generated, or a TSV corpus read, checked line by
// line and split) and its vocabularies (built, or learned by SentencePiece from the training
// split), the pairs that do not fit the model left out, all before a run folder is touched:
//
//   train::RunData d = train::make_run_data({.corpus = "pairs.tsv", .level = Level::Word});
//   trainer.begin(d.split, d.src_vocab, d.tgt_vocab, config);
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tapegrad/data/corpus.h"
#include "tapegrad/data/vocab.h"

namespace tapegrad::train {

struct DataOptions {
  std::string task = "dates";  // a built-in task (data::task_from_name) when `corpus` is empty
  std::string corpus{};        // a TSV file, source TAB target a line
  std::string valid_corpus{};  // the held-out pairs as a file of their own (else split off)
  std::string test_corpus{};   // pairs to test the trained model on once, at the end
  bool strict = false;         // a malformed or over-long pair is fatal (else skipped, said)
  int64_t train_size = 20000;  // generated training examples
  int64_t valid_size = 500;    // held out (of a corpus: at most a tenth, data::split_corpus)
  uint64_t seed = 0;           // the generation, or the corpus's shuffle
  data::Level level = data::Level::Char;
  int64_t vocab_size = 1000;  // pieces of a bpe or unigram vocabulary
  data::WordOptions words{};  // how the word level reads text
  // a vocab_size the training texts cannot fill is lowered to the largest they can, and said
  // through make_run_data's `report` (otherwise: a data::VocabularySizeError naming it)
  bool fit_vocab_size = false;
  bool shared_vocab = false;  // one vocabulary learned from both sides
  int64_t max_len = 128;      // the model's: a longer pair is skipped (a generated one refused)
};

struct RunData {
  data::CorpusSplit split;
  data::Vocabulary src_vocab{data::Level::Char}, tgt_vocab{data::Level::Char};
};

// Throws data::DataError naming the file and line of the first pair that does not fit (with
// `strict`), the generated example that does not, or the set none of whose pairs does.
// `report` receives each skipped line ("skipped FILE:LINE: what") and their count, and how many
// held-out pairs an automatic split dropped because their source also occurs among the training
// pairs, and a vocabulary size fitted down.
RunData make_run_data(const DataOptions& options,
                      const std::function<void(const std::string&)>& report = {});

}  // namespace tapegrad::train
