// Encoder-only models (seed 002): a transformer encoder over token ids with a task head.
//   SequenceClassifier: one label per sequence, from the mean of the non-pad positions.
//   TokenClassifier:    one label per token (tagging, NER-style).
// Glossary: B batch, S sequence length, C = d_model, K classes.
#pragma once

#include "tapegrad/nn/transformer.h"

namespace tapegrad::nn {

// EncoderClassifierConfig{.vocab = 50, .classes = 3, .d_model = 64}
struct EncoderClassifierConfig {
  int64_t vocab = 0;    // token vocabulary size, e.g. 50
  int64_t classes = 0;  // K: labels per sequence (SequenceClassifier) or per token
  int64_t d_model = 64;
  int64_t heads = 4;
  int64_t d_ff = 256;
  int64_t layers = 2;
  double dropout = 0.1;
  int64_t max_len = 256;
  int64_t pad_id = 0;
  Activation activation = Activation::ReLU;
  bool norm_first = false;
  uint64_t seed = 0;
};

// embed -> positional -> encoder -> head; the subclasses decide what the head reads.
class EncoderOnlyModel : public Module {
 public:
  // Initialised from cfg.seed.
  EncoderOnlyModel(std::string type_name, const EncoderClassifierConfig& cfg);
  // ids int64 [B, S] -> states [B, S, C], and the padding mask bool [B, S]
  std::pair<Tensor, Tensor> encode(const Tensor& ids);
  const EncoderClassifierConfig& config() const { return cfg_; }

  Child<Embedding> embed;
  Child<PositionalEncoding> positional;
  Child<Encoder> encoder;
  Child<Linear> head;  // C -> K, per sequence or per token

 protected:
  EncoderClassifierConfig cfg_;
};

class SequenceClassifier : public EncoderOnlyModel {
 public:
  explicit SequenceClassifier(const EncoderClassifierConfig& cfg);
  // ids [B, S] -> logits [B, K]. A sequence of only padding is an error.
  Tensor forward(const Tensor& ids);
};

class TokenClassifier : public EncoderOnlyModel {
 public:
  explicit TokenClassifier(const EncoderClassifierConfig& cfg);
  // ids [B, S] -> logits [B, S, K]
  Tensor forward(const Tensor& ids);
};

}  // namespace tapegrad::nn
