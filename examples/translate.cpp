// translate: loads a run saved by train and decodes sources given as arguments, or one per
// line on standard input (in batches), greedily, with beam search or by sampling: the settings
// of nn::generate. A source that cannot be decoded (too long for the model, empty, not UTF-8)
// gets an error on stderr naming its line or argument; the others are still decoded, and the
// exit code is 1 at the end. An output stops at --max-len-factor times its source's tokens plus
// 10 (and --max-len), so that a model that loops does not fill every line.
//
//   ./build/examples/translate --run runs/dates "tuesday the 4th of march 2025" "Mar 5, 1999"
//   echo "04/03/2025" | ./build/examples/translate --run runs/dates --beam 4
//   ./build/examples/translate --run runs/dates --sample --top-p 0.9 --seed 3 "4 mar 2025"
//   ./build/examples/translate --run runs/mine --ref test.en < test.de > test.out
//   ./build/examples/translate --run runs/dates --checkpoint latest "4 mar 2025"
//   ./build/examples/translate --run runs/dates --checkpoint 2500 "4 mar 2025"
//   ./build/examples/translate --run runs/dates/checkpoints/step-00003000 "4 mar 2025"
//
// --ref FILE scores the outputs against its lines, one reference per source, with corpus BLEU
// and chrF as sacreBLEU computes them by default (tapegrad/metrics/translation.h), printed on
// stderr after the outputs; an output that failed counts as empty.
#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "examples/cli.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/data/data_error.h"
#include "tapegrad/data/text.h"
#include "tapegrad/metrics/translation.h"
#include "tapegrad/train/run.h"

using namespace tapegrad;

namespace {

constexpr size_t kMaxLineBytes = 1 << 16;
constexpr uint64_t kMaxInputBytes = uint64_t{1} << 30;  // standard input in all
constexpr size_t kBatch = 64;                           // sources decoded together

struct Source {
  std::string text, where;  // where: "argument 2", "stdin:3"
  std::string error;        // set when it cannot be decoded
};

using Limits = train::DecodeLimits;

// Every output line so far, in order: what --ref scores.
std::vector<std::string> g_outputs;

// Decodes a batch of sources, printing one line each in order (empty for a failure) and the
// failures on stderr. Returns the number of failures.
int decode_batch(train::LoadedModel& run, std::vector<Source>& batch, const Limits& limits) {
  const int64_t limit = run.model->config().max_len;
  std::vector<std::vector<int64_t>> ids(batch.size());
  std::vector<size_t> good;
  for (size_t i = 0; i < batch.size(); ++i) {
    Source& s = batch[i];
    if (!s.error.empty()) continue;
    if (const auto bad = data::find_invalid_utf8(s.text)) {
      s.error = fmt::format("invalid UTF-8 at byte {}", *bad);
      continue;
    }
    ids[i] = run.src_vocab.encode(s.text);
    if (ids[i].empty()) {
      s.error = "empty source";
    } else if (static_cast<int64_t>(ids[i].size()) > limit) {
      s.error = fmt::format("{} tokens, over the model's max_len of {}", ids[i].size(), limit);
    } else {
      good.push_back(i);
    }
  }
  std::vector<std::string> text(batch.size());
  if (!good.empty()) {
    const auto out = train::decode(run, ids, good, limits);
    for (size_t g = 0; g < good.size(); ++g) text[good[g]] = run.tgt_vocab.decode(out[g]);
  }
  int failures = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    fmt::print("{}\n", text[i]);  // one output line per input, so outputs stay aligned
    g_outputs.push_back(text[i]);
    if (batch[i].error.empty()) continue;
    std::fflush(stdout);
    fmt::print(stderr, "translate: {}: {}\n", batch[i].where, batch[i].error);
    ++failures;
  }
  std::fflush(stdout);
  batch.clear();
  return failures;
}

// Decodes the lines of standard input in batches, as decode_batch does; returns the failures.
// Input that is not text, or has no end, stops with a DataError after the lines before it are
// decoded.
int decode_stdin(train::LoadedModel& run, std::vector<Source>& batch, const Limits& limits) {
  // a person typing at a terminal gets each answer at once
  const size_t batch_size = ::isatty(::fileno(stdin)) ? 1 : kBatch;
  data::LineReader reader(std::cin, "stdin", kMaxLineBytes, kMaxInputBytes);
  int failures = 0;
  try {
    while (const auto line = reader.next()) {
      batch.push_back({*line, reader.where(), ""});
      if (batch.size() == batch_size) failures += decode_batch(run, batch, limits);
    }
  } catch (const data::DataError&) {
    decode_batch(run, batch, limits);  // the lines before the one that stopped the input
    throw;
  }
  return failures;
}

// --ref: the outputs against the reference file's lines, read as the outputs' sources are.
void score(const std::string& path) {
  const std::vector<std::string> refs = data::read_lines(path, kMaxLineBytes, kMaxInputBytes);
  if (refs.size() != g_outputs.size()) {
    throw data::DataError(
        fmt::format("{}: {} reference lines for {} outputs", path, refs.size(), g_outputs.size()));
  }
  fmt::print(stderr, "{}, chrF {:.2f}, against {} ({} lines)\n",
             metrics::corpus_bleu(g_outputs, {refs}).describe(),
             metrics::corpus_chrf(g_outputs, {refs}), path, refs.size());
}

// Flags that would have no effect in the combination given.
void check_combinations(const examples::Flags& f, bool sample, int64_t beam) {
  if (sample && beam > 1) throw examples::FlagError("--sample and --beam exclude each other");
  for (const char* name : {"temperature", "top-k", "top-p", "seed"}) {
    if (!sample && f.given(name))
      throw examples::FlagError(fmt::format("--{} has no effect without --sample", name));
  }
  if (beam == 1 && f.given("length-penalty"))
    throw examples::FlagError("--length-penalty has no effect without --beam N, N > 1");
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("translate", [&] {
    examples::Flags f(argc, argv,
                      "translate: decode with a trained MiniTransformer\n"
                      "usage: translate --run DIR [--beam N] [SOURCE ...]  (stdin when no SOURCE)");
    const std::string dir =
        f.text("run", "runs/dates", "a run folder written by train, or one of its checkpoints");
    const std::string checkpoint =
        f.text("checkpoint", "best",
               "the run's checkpoint: best (by its validations), latest, or a step it keeps");
    const int64_t beam = f.integer("beam", 1, "beam width (1: greedy)", 1, 64);
    const int64_t max_len = f.integer(
        "max-len", 256, "most tokens to generate, <eos> included (at most the model's max_len)", 1,
        65536);
    const double factor =
        f.real("max-len-factor", 2,
               "an output stops at this many times its source's tokens, plus 10", 0, 1000);
    const double length_penalty =
        f.real("length-penalty", 0.6, "alpha of the GNMT length penalty (0: none)", 0, 10);
    const bool sample = f.boolean("sample", "draw tokens from the model instead of the best");
    const double temperature = f.real("temperature", 1.0, "sampling temperature", 1e-3, 100);
    const int64_t top_k =
        f.integer("top-k", 0, "sample among the k likeliest tokens (0: all)", 0, 1'000'000);
    const double top_p = f.real("top-p", 1.0, "nucleus sampling: probability mass kept", 1e-6, 1);
    const auto seed =
        static_cast<uint64_t>(f.integer("seed", 0, "seed for sampling", 0, INT64_MAX));
    const int64_t threads = f.integer(
        "threads", 2, "threads for products and kernels (set_num_threads)", 1, kMaxThreads);
    const std::string ref = f.text("ref", "", "score the outputs against this file's lines");
    f.takes_arguments();
    if (!f.finish()) return 0;
    check_combinations(f, sample, beam);
    set_num_threads(static_cast<int>(threads));
    train::LoadedModel run = train::load_run(dir, checkpoint);
    const Limits limits{.options = {.max_len = std::min(max_len, run.model->config().max_len),
                                    .beam = beam,
                                    .length_penalty = length_penalty,
                                    .sample = sample,
                                    .temperature = temperature,
                                    .top_k = top_k,
                                    .top_p = top_p,
                                    .seed = seed},
                        .factor = factor};
    int failures = 0;
    std::vector<Source> batch;
    if (!f.positional().empty()) {
      for (size_t i = 0; i < f.positional().size(); ++i) {
        batch.push_back({f.positional()[i], fmt::format("argument {}", i + 1), ""});
        if (batch.size() == kBatch) failures += decode_batch(run, batch, limits);
      }
    } else {
      failures += decode_stdin(run, batch, limits);
    }
    failures += decode_batch(run, batch, limits);
    if (failures > 0)
      fmt::print(stderr, "translate: {} source(s) could not be decoded\n", failures);
    if (!ref.empty()) score(ref);
    return failures > 0 ? 1 : 0;
  });
}
