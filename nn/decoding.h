// Inference with a trained MiniTransformer: greedy decoding and beam search. Both encode the
// source once and then run the decoder on growing target prefixes; they switch the model to
// eval mode for the call and record nothing on the tape.
#pragma once

#include <vector>

#include "nn/transformer.h"

namespace tapegrad::nn {

struct DecodeOptions {
  int64_t bos = 1;       // first decoder input
  int64_t eos = 2;       // ends a hypothesis (not included in the result)
  int64_t max_len = 64;  // tokens generated at most
};

// src_ids [B, S] -> for each row, the argmax tokens until <eos> or max_len.
std::vector<std::vector<int64_t>> greedy_decode(MiniTransformer& model, const Tensor& src_ids,
                                                const DecodeOptions& options = {});

// src_ids [1, S] -> the best of `beam` hypotheses by log-probability with the GNMT length
// penalty ((5 + len) / 6)^0.6 (Wu et al. 2016). beam = 1 is greedy decoding.
std::vector<int64_t> beam_search(MiniTransformer& model, const Tensor& src_ids, int64_t beam,
                                 const DecodeOptions& options = {});

}  // namespace tapegrad::nn
