// Batches for teacher-forced training. Each example is encoded once; a batch pads its
// sequences to the longest in it, with
//   decoder input  = <bos> + target        e.g. <bos> 2 0 2 5
//   decoder output = target + <eos>        e.g. 2 0 2 5 <eos>
// so position t learns to predict token t + 1 from tokens <= t. Batches are built from
// examples of similar length (bucketing) to waste little on padding, and their order is
// shuffled with the run's generator.
#pragma once

#include <cstdint>
#include <vector>

#include "tapegrad/autograd/random.h"
#include "tapegrad/autograd/tensor.h"
#include "tapegrad/data/corpus.h"
#include "tapegrad/data/vocab.h"

namespace tapegrad::data {

struct EncodedExample {
  std::vector<int64_t> source;
  std::vector<int64_t> target;  // without <bos>/<eos>
};

struct Batch {
  Tensor src;                 // int64 [B, S], padded with <pad>
  Tensor tgt_in;              // int64 [B, T]: <bos> + target
  Tensor tgt_out;             // int64 [B, T]: target + <eos>
  int64_t target_tokens = 0;  // non-pad entries of tgt_out
};

std::vector<EncodedExample> encode_all(const std::vector<Example>& examples,
                                       const Vocabulary& src_vocab, const Vocabulary& tgt_vocab);

// One batch of the given examples, in order.
Batch make_batch(const std::vector<const EncodedExample*>& examples);

// How large a batch may grow: at most `rows` examples and, when `tokens` is positive, at most
// `tokens` tokens counted as fairseq's --max-tokens counts them, the examples times the longest
// sequence among them (a source, or a target with its <eos>). A batch holds at least one example.
struct BatchLimit {
  int64_t rows = 64;
  int64_t tokens = 0;
};

// All examples in batches within `limit`: examples are sorted by length within shuffled pools
// of about 50 batches, cut into batches, and the batches shuffled.
std::vector<Batch> make_batches(const std::vector<EncodedExample>& examples, BatchLimit limit,
                                Generator& gen);

}  // namespace tapegrad::data
