// The transformer of "Attention Is All You Need": feed-forward block, encoder and decoder
// layers and stacks, and the encoder-decoder MiniTransformer. Submodule names and forward order
// follow PyTorch's nn.Transformer* so the two map one to one.
//
// Glossary: B batch, S source length, T target length, C = d_model, V vocabulary.
#pragma once

#include <string>
#include <vector>

#include "tapegrad/nn/multi_head_attention.h"

namespace tapegrad::nn {

// Everything a layer needs to know. Designated initializers:
//   LayerConfig{.d_model = 128, .heads = 4, .d_ff = 512}
struct LayerConfig {
  int64_t d_model = 512;  // C, e.g. 512 in the paper's base model
  int64_t heads = 8;      // H; d_model must be divisible by it
  int64_t d_ff = 2048;    // the feed-forward block's hidden width, e.g. 4 * d_model
  double dropout = 0.1;   // after attention, feed-forward and positional encoding
  Activation activation = Activation::ReLU;
  bool norm_first = false;  // false: post-norm as in the paper; true: pre-norm
};

// Bounds on a model config, so that a hostile or mistyped one is refused before it allocates.
// Each is well past what a CPU transformer trained here uses, and state_elements caps the whole.
struct ConfigLimits {
  int64_t vocab = 1'000'000;  // ids of a word-level vocabulary of a large corpus
  int64_t d_model = 16384;    // wider than GPT-3's 12288
  int64_t heads = 1024;
  int64_t d_ff = 65536;
  int64_t layers = 128;     // per stack
  int64_t max_len = 65536;  // a position table is max_len x d_model
  // 2^31 elements: 8 GiB of float32 weights, and Adam's two moments triple that, which already
  // exceeds a 24 GiB machine.
  int64_t state_elements = int64_t{1} << 31;
};
inline constexpr ConfigLimits kConfigLimits{};
// A model config's check(): "NAME = V is outside [LO, HI]" joins `problems` unless lo <= v <= hi.
void check_range(std::vector<std::string>& problems, const char* name, int64_t v, int64_t lo,
                 int64_t hi);
// A model config's check() of its layers: d_model, heads and d_ff within kConfigLimits, heads
// dividing d_model, dropout in [0, 1); each problem found is appended to `problems`.
void check_layer_config(const LayerConfig& layer, std::vector<std::string>& problems);
// Elements of one layer's parameters: an encoder layer's, or with cross-attention a decoder's.
int64_t layer_elements(const LayerConfig& layer, bool cross_attention);

// x [..., C] -> linear2(dropout(activation(linear1(x)))) [..., C]
class PositionwiseFeedForward : public Module {
 public:
  PositionwiseFeedForward(const LayerConfig& cfg, Generator& gen);
  Tensor forward(const Tensor& x);

  Child<Linear> linear1, linear2;

 private:
  Activation activation_;
  Child<Dropout> dropout_;
};

// Self-attention and feed-forward, each with a residual connection and layer norm.
class EncoderLayer : public Module {
 public:
  EncoderLayer(const LayerConfig& cfg, Generator& gen);
  // x [B, S, C], padding bool [B, S] and mask broadcastable to [B, H, S, S] (each may be
  // undefined; a causal mask makes the layer a decoder-only model's) -> [B, S, C]
  Tensor forward(const Tensor& x, const Tensor& padding = Tensor(), const Tensor& mask = Tensor());
  // Causal self-attention one position at a time: x [B, 1, C] attends to the cache, which it
  // joins -> what forward with a causal mask gives at that position (the cache is inference's).
  Tensor step(const Tensor& x, MultiHeadAttention::KVCache& cache);

  Child<MultiHeadAttention> self_attn;
  Child<PositionwiseFeedForward> feed_forward;
  Child<LayerNorm> norm1, norm2;

 private:
  Child<Dropout> dropout1_, dropout2_;
  SublayerConnection self_attn_sublayer_, feed_forward_sublayer_;
};

class Encoder : public Module {
 public:
  // final_norm adds a LayerNorm after the last layer (what pre-norm stacks need).
  Encoder(const LayerConfig& cfg, int64_t num_layers, bool final_norm, Generator& gen);
  Tensor forward(const Tensor& x, const Tensor& padding = Tensor());

  Child<ModuleList<EncoderLayer>> layers;
  Child<LayerNorm> norm;  // null without final_norm
};

// Masked self-attention, cross-attention over the encoder memory, feed-forward; each with
// add & norm.
class DecoderLayer : public Module {
 public:
  DecoderLayer(const LayerConfig& cfg, Generator& gen);
  // x [B, T, C], memory [B, S, C]; self_mask broadcastable to [B, H, T, T] (causal), padding
  // masks [B, T] and [B, S] (each may be undefined) -> [B, T, C]
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& self_mask,
                 const Tensor& tgt_padding, const Tensor& memory_padding);

  // Incremental decoding: the keys and values of the positions decoded so far (self) and of
  // the encoder memory (cross, projected once).
  struct Cache {
    MultiHeadAttention::KVCache self, cross;
  };
  // A cache for up to `capacity` target positions over this memory [B, S, C].
  Cache start(const Tensor& memory, int64_t capacity);
  // x [B, 1, C], the next position -> [B, 1, C]: what forward gives at that position for the
  // whole prefix, with tgt_padding [B, t] covering every position so far.
  Tensor step(const Tensor& x, Cache& cache, const Tensor& tgt_padding,
              const Tensor& memory_padding);

  Child<MultiHeadAttention> self_attn, cross_attn;
  Child<PositionwiseFeedForward> feed_forward;
  Child<LayerNorm> norm1, norm2, norm3;

 private:
  Child<Dropout> dropout1_, dropout2_, dropout3_;
  SublayerConnection self_attn_sublayer_, cross_attn_sublayer_, feed_forward_sublayer_;
};

class Decoder : public Module {
 public:
  Decoder(const LayerConfig& cfg, int64_t num_layers, bool final_norm, Generator& gen);
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& self_mask,
                 const Tensor& tgt_padding, const Tensor& memory_padding);
  // One position through every layer (see DecoderLayer::step); caches one per layer.
  Tensor step(const Tensor& x, std::vector<DecoderLayer::Cache>& caches, const Tensor& tgt_padding,
              const Tensor& memory_padding);

  Child<ModuleList<DecoderLayer>> layers;
  Child<LayerNorm> norm;
};

// MiniTransformerConfig{.src_vocab = 40, .tgt_vocab = 40, .d_model = 128, .heads = 4}
struct MiniTransformerConfig {
  int64_t src_vocab = 0;       // source vocabulary size, e.g. 64
  int64_t tgt_vocab = 0;       // target vocabulary size, e.g. 64
  int64_t d_model = 128;       // C
  int64_t heads = 4;           // H
  int64_t d_ff = 512;          // feed-forward width
  int64_t encoder_layers = 2;  // the paper uses 6
  int64_t decoder_layers = 2;
  double dropout = 0.1;
  int64_t max_len = 256;  // longest source or target sequence
  int64_t pad_id = 0;     // padding token in both vocabularies: masked, no gradient
  Activation activation = Activation::ReLU;
  bool norm_first = false;        // pre-norm layers (and final norms on both stacks)
  bool share_embeddings = false;  // one embedding for source and target (needs equal vocabs)
  bool tie_output = false;        // output projection reuses the target embedding's weight
  uint64_t seed = 0;              // initialisation and dropout

  LayerConfig layer() const;
  // Throws Error naming every field out of range (kConfigLimits gives the bounds and why),
  // before anything is allocated. The constructor calls it.
  void check() const;
  // Elements of every tensor in the model's state (parameters and the positional table), in
  // closed form: what a checkpoint of this config holds.
  int64_t state_elements() const;
};

class MiniTransformer : public Module {
 public:
  explicit MiniTransformer(const MiniTransformerConfig& cfg);

  // src_ids [B, S], tgt_ids [B, T] (the decoder input, teacher-forced) -> logits [B, T, V]
  Tensor forward(const Tensor& src_ids, const Tensor& tgt_ids);

  // The two halves, for inference: encode once, then decode any number of target prefixes.
  struct Memory {
    Tensor states;   // [B, S, C]
    Tensor padding;  // bool [B, S]
  };
  Memory encode(const Tensor& src_ids);
  // tgt_ids [B, T] -> logits [B, T, V] over the encoded source.
  Tensor decode(const Tensor& tgt_ids, const Memory& memory);

  // Incremental decoding: one position at a time, each layer's keys and values kept, so a
  // step costs work in proportion to the prefix, not its square. decode_step gives the same
  // logits as decode() over the whole prefix at its last position (the tests hold it to that).
  struct DecodeState {
    Memory memory;                            // [N, S, C], a row per hypothesis
    std::vector<DecoderLayer::Cache> layers;  // one per decoder layer
    Tensor tgt_padding;                       // bool [N, t]: positions so far that are padding
    int64_t length = 0;                       // t, positions decoded so far
  };
  // Caches for up to `capacity` target positions (at most the model's max_len).
  DecodeState start_decoding(const Memory& memory, int64_t capacity);
  // Keeps rows `rows` of the state, in that order (a row may repeat): beam search reorders its
  // hypotheses this way, and a batch drops the sources that are done. `same_sources` promises
  // that every new row i comes from a source whose memory row i already holds (beams reordered
  // within each source, none dropped): the memory and cross-attention caches then stay as
  // they are, and only the self-attention caches are copied.
  static void keep_rows(DecodeState& state, const std::vector<int64_t>& rows,
                        bool same_sources = false);
  // ids [N], the token at position t of every row -> logits [N, V] for position t + 1.
  Tensor decode_step(const Tensor& ids, DecodeState& state);

  const MiniTransformerConfig& config() const { return cfg_; }

  // With share_embeddings, tgt_embed is src_embed (registered once, as "src_embed").
  Child<Embedding> src_embed, tgt_embed;
  Child<PositionalEncoding> positional;
  Child<Encoder> encoder;
  Child<Decoder> decoder;
  Child<Linear> out_proj;  // null with tie_output
  Tensor out_bias;         // [V], only with tie_output

 private:
  Tensor embed(const Embedding& table, const Tensor& ids, int64_t start = 0);
  Tensor project_out(const Tensor& x);  // [..., C] -> logits [..., V]
  MiniTransformerConfig cfg_;
};

}  // namespace tapegrad::nn
