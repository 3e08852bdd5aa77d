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

// All examples in batches of at most batch_size: examples are sorted by length within shuffled
// pools of 50 batches, cut into batches, and the batches shuffled.
std::vector<Batch> make_batches(const std::vector<EncodedExample>& examples, int64_t batch_size,
                                Generator& gen);

}  // namespace tapegrad::data
