// Inference. With a trained MiniTransformer: one generate() for greedy decoding, beam search
// and sampling, over a batch of sources. The source is encoded once; the decoder then runs one
// position a step with each layer's keys and values cached (MiniTransformer::decode_step), or,
// with cache = false, over the whole prefix every step (the reference the tests compare with).
// With a LanguageModel: continue_text(), a prompt continued the same two ways.
// The model is in eval mode for the call and nothing is recorded on the tape.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "tapegrad/nn/language_model.h"
#include "tapegrad/nn/transformer.h"

namespace tapegrad::nn {

struct Generation {
  std::vector<int64_t> tokens;  // without <bos> and <eos>
  double log_prob = 0;          // under the model, <eos> included when finished
  double score = 0;             // log_prob / ((5 + len) / 6)^alpha, len counting <eos>
  bool finished = false;        // ended with <eos>; false when cut at max_len
};

// A source's search after one step: its live hypotheses, in rank order (score unset), and
// those finished so far, best first.
struct SearchStep {
  int64_t step = 0;
  int64_t source = 0;
  std::vector<Generation> live, finished;
};

// GenerateOptions{.beam = 4}, GenerateOptions{.sample = true, .top_p = 0.9, .seed = 7}
struct GenerateOptions {
  int64_t max_len = 64;         // tokens generated at most, <eos> included (<= the model's max_len)
  int64_t beam = 1;             // hypotheses kept per source; 1 without sampling is greedy
  double length_penalty = 0.6;  // alpha of the GNMT penalty ((5 + len) / 6)^alpha; 0: none
  bool sample = false;          // draw each token from the model's distribution (beam 1)
  double temperature = 1.0;     // sampling: the logits are divided by it
  int64_t top_k = 0;            // sampling: only the k most likely tokens (0: all)
  double top_p = 1.0;           // sampling: the smallest set of tokens holding this probability
  uint64_t seed = 0;            // sampling: source b's draws depend on (seed, b, step) only
  bool cache = true;            // false: rerun the decoder over the whole prefix every step
  int64_t bos = 1, eos = 2;
  // Called after each step for each source still searching: the search step by step.
  std::function<void(const SearchStep&)> on_step = nullptr;
};

// src_ids [B, S] (padded with the model's pad id) -> one Generation per source.
//
// Beam search keeps `beam` live hypotheses per source at every step: it ranks the 2 x beam best
// continuations by log-probability, moves those ending in <eos> to the finished list (compared
// with each other by score), and keeps the best `beam` others. A source is done when no live
// hypothesis can still beat its best finished one: a live score can only rise by growing
// longer, to at most log_prob / penalty(max_len). A hypothesis cut at max_len is returned only
// when none finished. beam = 1 takes the single best token each step: greedy decoding.
std::vector<Generation> generate(MiniTransformer& model, const Tensor& src_ids,
                                 const GenerateOptions& options = {});

// ContinueOptions{.max_new_tokens = 500, .temperature = 0.8, .top_k = 40, .seed = 7}
struct ContinueOptions {
  int64_t max_new_tokens = 100;
  bool sample = true;        // draw each token; false: the most likely one (greedy)
  double temperature = 1.0;  // the logits are divided by it
  int64_t top_k = 0;         // only the k most likely tokens (0: all)
  double top_p = 1.0;        // the smallest set of tokens holding this probability
  uint64_t seed = 0;         // the draw of step t depends on (seed, t) only
  bool cache = true;         // false: forward() over the whole context every step (the reference)
};

// A text continued: the tokens a language model draws after `prompt` (at least one token; the
// last block_size of it are the context). While the context fits the model's block, each step
// is one cached position (LanguageModel::decode_step); past it, the context slides and each
// step runs forward() over its last block_size tokens, as nanoGPT's generate() does.
std::vector<int64_t> continue_text(LanguageModel& model, std::span<const int64_t> prompt,
                                   const ContinueOptions& options = {});

// The length-penalised score generate() ranks by.
double length_penalized(double log_prob, int64_t length, double alpha);

}  // namespace tapegrad::nn
