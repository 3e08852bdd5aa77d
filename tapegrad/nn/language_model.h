// A decoder-only transformer language model (GPT; Radford et al. 2018, 2019): token and learned
// position embeddings, a stack of pre-norm layers of causal self-attention and a GELU
// feed-forward, a final layer norm, and an output projection tied to the token embedding. It
// predicts each next token of a text from the ones before it.
//
// Its layer is the encoder's (transformer.h): what makes it a decoder is the causal mask, as in
// PyTorch's word_language_model example, which builds its model from nn.TransformerEncoder.
//
// Glossary: B batch, T length (at most block_size), C = d_model, V vocabulary.
#pragma once

#include <vector>

#include "tapegrad/nn/transformer.h"

namespace tapegrad::nn {

// LanguageModelConfig{.vocab = 65, .d_model = 128, .heads = 4, .layers = 4, .block_size = 64}
struct LanguageModelConfig {
  int64_t vocab = 0;        // V, e.g. 65 characters
  int64_t d_model = 128;    // C
  int64_t heads = 4;        // H; d_model must be divisible by it
  int64_t d_ff = 512;       // feed-forward width, e.g. 4 * d_model
  int64_t layers = 4;       // e.g. 12 in GPT-2 small
  int64_t block_size = 64;  // the context: the longest sequence, the position table's rows
  double dropout = 0.0;     // after the embeddings, attention and each sublayer
  uint64_t seed = 0;        // initialisation and dropout

  LayerConfig layer() const;  // pre-norm, GELU
  // Throws Error naming every field out of range, before anything is allocated.
  void check() const;
  // Elements of every parameter, in closed form.
  int64_t state_elements() const;
};

class LanguageModel : public Module {
 public:
  // Weights as GPT-2 draws them: N(0, 0.02) for embeddings and linear weights, the projections
  // that end a residual branch (attention's out_proj, the feed-forward's linear2) N(0, 0.02 /
  // sqrt(2 * layers)) so the residual stream's variance does not grow with depth; biases zero.
  explicit LanguageModel(const LanguageModelConfig& cfg);

  // ids [B, T] -> logits [B, T, V]: at position t, the distribution of token t + 1.
  Tensor forward(const Tensor& ids);

  // Incremental decoding (sampling): each layer's keys and values kept, one position a step.
  struct DecodeState {
    std::vector<MultiHeadAttention::KVCache> layers;  // one per layer
    int64_t length = 0;                               // positions so far
  };
  // Caches for `batch` rows of up to `capacity` positions (at most block_size).
  DecodeState start_decoding(int64_t batch, int64_t capacity);
  // ids [N], the token at the next position of every row -> logits [N, V] for the one after:
  // what forward() gives at that position over the whole prefix (the tests hold it to that).
  Tensor decode_step(const Tensor& ids, DecodeState& state);

  const LanguageModelConfig& config() const { return cfg_; }

  Child<Embedding> tok_embed, pos_embed;
  Child<Dropout> dropout;
  Child<ModuleList<EncoderLayer>> layers;
  Child<LayerNorm> norm;

 private:
  Tensor embed(const Tensor& ids, int64_t start);  // [B, L] at positions start.. -> [B, L, C]
  Tensor project_out(const Tensor& x);             // [..., C] -> logits [..., V]
  LanguageModelConfig cfg_;
};

}  // namespace tapegrad::nn
