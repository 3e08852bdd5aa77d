// The transformer's modules (feed-forward, encoder and decoder layers and stacks,
// MiniTransformer), the decoder's incremental step and its state, and the config: checks and
// closed-form size.
#include "tapegrad/nn/transformer.h"

#include <cmath>
#include <cstring>

#include "tapegrad/autograd/ops/matmul.h"
#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/io/files.h"

namespace tapegrad::nn {

PositionwiseFeedForward::PositionwiseFeedForward(const LayerConfig& cfg, Generator& gen)
    : Module("PositionwiseFeedForward"), activation_(cfg.activation) {
  linear1 = register_module("linear1", std::make_shared<Linear>(cfg.d_model, cfg.d_ff, gen));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(cfg.dropout, gen));
  linear2 = register_module("linear2", std::make_shared<Linear>(cfg.d_ff, cfg.d_model, gen));
}

// linear2(dropout(activation(linear1(x)))), the activation and dropout in linear1's output
// pass
Tensor PositionwiseFeedForward::forward(const Tensor& x) {
  return linear2(linear_activation_dropout(*linear1, x, activation_, *dropout_));
}

EncoderLayer::EncoderLayer(const LayerConfig& cfg, Generator& gen) : Module("EncoderLayer") {
  self_attn = register_module(
      "self_attn", std::make_shared<MultiHeadAttention>(cfg.d_model, cfg.heads, cfg.dropout, gen));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(cfg.dropout, gen));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(cfg.d_model));
  feed_forward =
      register_module("feed_forward", std::make_shared<PositionwiseFeedForward>(cfg, gen));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(cfg.dropout, gen));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(cfg.d_model));
  self_attn_sublayer_ = SublayerConnection(*norm1, *dropout1_, cfg.norm_first, norm2.get());
  feed_forward_sublayer_ = SublayerConnection(*norm2, *dropout2_, cfg.norm_first);
}

Tensor EncoderLayer::forward(const Tensor& x, const Tensor& padding, const Tensor& mask) {
  const AttentionMasks masks{.key_padding = padding, .attn = mask};
  // self-attention, then feed-forward, each a residual sublayer with its norm
  const Residual r = self_attn_sublayer_(
      {x, Tensor()}, [&](const Tensor& h) { return self_attn(h, h, h, masks); });
  return feed_forward_sublayer_(r, [&](const Tensor& h) { return feed_forward(h); }).x;
}

// forward() for one position; self-attention attends to the cache.
Tensor EncoderLayer::step(const Tensor& x, MultiHeadAttention::KVCache& cache) {
  const Residual r = self_attn_sublayer_(
      {x, Tensor()}, [&](const Tensor& h) { return self_attn->forward_cached(h, cache, true); });
  return feed_forward_sublayer_(r, [&](const Tensor& h) { return feed_forward(h); }).x;
}

Encoder::Encoder(const LayerConfig& cfg, int64_t num_layers, bool final_norm, Generator& gen)
    : Module("Encoder") {
  TG_CHECK(num_layers >= 0, "Encoder: negative number of layers {}", num_layers);
  layers = register_module("layers", std::make_shared<ModuleList<EncoderLayer>>());
  for (int64_t i = 0; i < num_layers; ++i)
    layers->push_back(std::make_shared<EncoderLayer>(cfg, gen));
  if (final_norm) norm = register_module("norm", std::make_shared<LayerNorm>(cfg.d_model));
}

Tensor Encoder::forward(const Tensor& input, const Tensor& padding) {
  Tensor x = input;
  for (const auto& layer : *layers) x = layer(x, padding);
  if (norm) x = norm(x);
  return x;
}

DecoderLayer::DecoderLayer(const LayerConfig& cfg, Generator& gen) : Module("DecoderLayer") {
  self_attn = register_module(
      "self_attn", std::make_shared<MultiHeadAttention>(cfg.d_model, cfg.heads, cfg.dropout, gen));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(cfg.dropout, gen));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(cfg.d_model));
  cross_attn = register_module(
      "cross_attn", std::make_shared<MultiHeadAttention>(cfg.d_model, cfg.heads, cfg.dropout, gen));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(cfg.dropout, gen));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(cfg.d_model));
  feed_forward =
      register_module("feed_forward", std::make_shared<PositionwiseFeedForward>(cfg, gen));
  dropout3_ = register_module("dropout3", std::make_shared<Dropout>(cfg.dropout, gen));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(cfg.d_model));
  self_attn_sublayer_ = SublayerConnection(*norm1, *dropout1_, cfg.norm_first, norm2.get());
  cross_attn_sublayer_ = SublayerConnection(*norm2, *dropout2_, cfg.norm_first, norm3.get());
  feed_forward_sublayer_ = SublayerConnection(*norm3, *dropout3_, cfg.norm_first);
}

Tensor DecoderLayer::forward(const Tensor& x, const Tensor& memory, const Tensor& self_mask,
                             const Tensor& tgt_padding, const Tensor& memory_padding) {
  const AttentionMasks self_masks{.key_padding = tgt_padding, .attn = self_mask};
  const AttentionMasks cross_masks{.key_padding = memory_padding};
  // masked self-attention, cross-attention over the encoder memory, feed-forward: each a
  // residual sublayer with its norm
  const Residual r1 = self_attn_sublayer_(
      {x, Tensor()}, [&](const Tensor& h) { return self_attn(h, h, h, self_masks); });
  const Residual r2 = cross_attn_sublayer_(
      r1, [&](const Tensor& h) { return cross_attn(h, memory, memory, cross_masks); });
  return feed_forward_sublayer_(r2, [&](const Tensor& h) { return feed_forward(h); }).x;
}

DecoderLayer::Cache DecoderLayer::start(const Tensor& memory, int64_t capacity) {
  return {.self = self_attn->empty_cache(memory.size(0), capacity, memory.dtype()),
          .cross = cross_attn->project(memory)};
}

// forward() for one position: self-attention attends to the cache, which holds only the
// positions before this one, and cross-attention to the memory's projected keys and values.
Tensor DecoderLayer::step(const Tensor& x, Cache& cache, const Tensor& tgt_padding,
                          const Tensor& memory_padding) {
  const AttentionMasks self_masks{.key_padding = tgt_padding};
  const AttentionMasks cross_masks{.key_padding = memory_padding};
  const Residual r1 = self_attn_sublayer_({x, Tensor()}, [&](const Tensor& h) {
    return self_attn->forward_cached(h, cache.self, true, self_masks);
  });
  const Residual r2 = cross_attn_sublayer_(r1, [&](const Tensor& h) {
    return cross_attn->forward_cached(h, cache.cross, false, cross_masks);
  });
  return feed_forward_sublayer_(r2, [&](const Tensor& h) { return feed_forward(h); }).x;
}

Decoder::Decoder(const LayerConfig& cfg, int64_t num_layers, bool final_norm, Generator& gen)
    : Module("Decoder") {
  TG_CHECK(num_layers >= 0, "Decoder: negative number of layers {}", num_layers);
  layers = register_module("layers", std::make_shared<ModuleList<DecoderLayer>>());
  for (int64_t i = 0; i < num_layers; ++i)
    layers->push_back(std::make_shared<DecoderLayer>(cfg, gen));
  if (final_norm) norm = register_module("norm", std::make_shared<LayerNorm>(cfg.d_model));
}

Tensor Decoder::forward(const Tensor& input, const Tensor& memory, const Tensor& self_mask,
                        const Tensor& tgt_padding, const Tensor& memory_padding) {
  Tensor x = input;
  for (const auto& layer : *layers) {
    x = layer(x, memory, self_mask, tgt_padding, memory_padding);
  }
  if (norm) x = norm(x);
  return x;
}

Tensor Decoder::step(const Tensor& input, std::vector<DecoderLayer::Cache>& caches,
                     const Tensor& tgt_padding, const Tensor& memory_padding) {
  TG_CHECK(caches.size() == layers->size(), "Decoder: {} caches for {} layers", caches.size(),
           layers->size());
  Tensor x = input;
  for (size_t i = 0; i < caches.size(); ++i) {
    x = (*layers)[i].step(x, caches[i], tgt_padding, memory_padding);
  }
  if (norm) x = norm(x);
  return x;
}

// ---------------------------------------------------------------------------------------------
// MiniTransformer

LayerConfig MiniTransformerConfig::layer() const {
  return {.d_model = d_model,
          .heads = heads,
          .d_ff = d_ff,
          .dropout = dropout,
          .activation = activation,
          .norm_first = norm_first};
}

namespace {
// Counts fit in int64 once check() has bounded every factor.
int64_t dense(int64_t in, int64_t out) { return in * out + out; }  // a Linear's weight and bias
}  // namespace

void check_range(std::vector<std::string>& problems, const char* name, int64_t v, int64_t lo,
                 int64_t hi) {
  if (v < lo || v > hi)
    problems.push_back(fmt::format("{} = {} is outside [{}, {}]", name, v, lo, hi));
}

void check_layer_config(const LayerConfig& l, std::vector<std::string>& problems) {
  check_range(problems, "d_model", l.d_model, 1, kConfigLimits.d_model);
  check_range(problems, "heads", l.heads, 1, kConfigLimits.heads);
  check_range(problems, "d_ff", l.d_ff, 1, kConfigLimits.d_ff);
  if (l.heads >= 1 && l.d_model % l.heads != 0) {
    problems.push_back(
        fmt::format("d_model = {} is not divisible by heads = {}", l.d_model, l.heads));
  }
  if (!(l.dropout >= 0 && l.dropout < 1)) {
    problems.push_back(fmt::format("dropout = {} is outside [0, 1)", l.dropout));
  }
}

int64_t layer_elements(const LayerConfig& l, bool cross_attention) {
  const int64_t C = l.d_model, attention = 4 * dense(C, C), norm = 2 * C;
  const int64_t feed_forward = dense(C, l.d_ff) + dense(l.d_ff, C);
  return cross_attention ? 2 * attention + feed_forward + 3 * norm
                         : attention + feed_forward + 2 * norm;
}

void MiniTransformerConfig::check() const {
  std::vector<std::string> problems;
  check_range(problems, "src_vocab", src_vocab, 1, kConfigLimits.vocab);
  check_range(problems, "tgt_vocab", tgt_vocab, 1, kConfigLimits.vocab);
  check_layer_config(layer(), problems);
  check_range(problems, "encoder_layers", encoder_layers, 0, kConfigLimits.layers);
  check_range(problems, "decoder_layers", decoder_layers, 1, kConfigLimits.layers);
  check_range(problems, "max_len", max_len, 2, kConfigLimits.max_len);
  if (pad_id < 0 || pad_id >= std::min(src_vocab, tgt_vocab)) {
    problems.push_back(fmt::format("pad_id = {} is not an id of both vocabularies", pad_id));
  }
  if (share_embeddings && src_vocab != tgt_vocab) {
    problems.push_back(fmt::format("share_embeddings needs equal vocabularies, got {} and {}",
                                   src_vocab, tgt_vocab));
  }
  if (problems.empty() && state_elements() > kConfigLimits.state_elements) {
    problems.push_back(fmt::format("the model would hold {} elements, over the limit of {}",
                                   state_elements(), kConfigLimits.state_elements));
  }
  TG_CHECK(problems.empty(), "MiniTransformerConfig: {}", fmt::join(problems, "; "));
}

int64_t MiniTransformerConfig::state_elements() const {
  const int64_t C = d_model, norm = 2 * C;
  const int64_t embeddings = src_vocab * C + (share_embeddings ? 0 : tgt_vocab * C);
  const int64_t output = tie_output ? tgt_vocab : dense(C, tgt_vocab);
  const int64_t final_norms = norm_first ? 2 * norm : 0;
  return embeddings + max_len * C + encoder_layers * layer_elements(layer(), false) +
         decoder_layers * layer_elements(layer(), true) + final_norms + output;
}

MiniTransformer::MiniTransformer(const MiniTransformerConfig& cfg)
    : Module("MiniTransformer"), cfg_(cfg) {
  cfg.check();
  Generator gen(cfg.seed);
  // Embeddings start at N(0, 1/C), so after the sqrt(C) scaling in embed() tokens have unit
  // variance, the scale of the positional encoding (fairseq's choice). With PyTorch's N(0, 1)
  // they would be sqrt(C) times louder and drown out the positions.
  const double embed_std = 1.0 / std::sqrt(static_cast<double>(cfg.d_model));
  src_embed = register_module("src_embed", std::make_shared<Embedding>(cfg.src_vocab, cfg.d_model,
                                                                       gen, cfg.pad_id, embed_std));
  tgt_embed =
      cfg.share_embeddings
          ? src_embed
          : register_module("tgt_embed", std::make_shared<Embedding>(cfg.tgt_vocab, cfg.d_model,
                                                                     gen, cfg.pad_id, embed_std));
  positional = register_module("positional", std::make_shared<PositionalEncoding>(
                                                 cfg.d_model, cfg.max_len, cfg.dropout, gen));
  encoder = register_module(
      "encoder", std::make_shared<Encoder>(cfg.layer(), cfg.encoder_layers, cfg.norm_first, gen));
  decoder = register_module(
      "decoder", std::make_shared<Decoder>(cfg.layer(), cfg.decoder_layers, cfg.norm_first, gen));
  if (cfg.tie_output) {
    out_bias = zeros({cfg.tgt_vocab});
    register_parameter("out_bias", out_bias);
  } else {
    out_proj =
        register_module("out_proj", std::make_shared<Linear>(cfg.d_model, cfg.tgt_vocab, gen));
  }
}

// ids [B, L] at positions start.. -> positional(embedding(ids) * sqrt(C)) [B, L, C] (section
// 3.4 of the paper)
Tensor MiniTransformer::embed(const Embedding& table, const Tensor& ids, int64_t start) {
  TG_CHECK(ids.dtype() == DType::Int64 && ids.dim() == 2 && ids.size(0) > 0 && ids.size(1) > 0,
           "MiniTransformer: token ids must be int64 [B, L] with B, L > 0, got {} {}", ids.dtype(),
           ids.shape());
  return positional(call(table, ids) * std::sqrt(static_cast<double>(cfg_.d_model)), start);
}

Tensor MiniTransformer::project_out(const Tensor& x) {
  if (out_proj) return out_proj(x);
  return matmul(x, transpose(tgt_embed->weight, 0, 1)) + out_bias;
}

MiniTransformer::DecodeState MiniTransformer::start_decoding(const Memory& memory,
                                                             int64_t capacity) {
  TG_CHECK(capacity >= 1 && capacity <= cfg_.max_len,
           "MiniTransformer: a decoding capacity of {} positions is outside [1, {}]", capacity,
           cfg_.max_len);
  DecodeState state{.memory = memory, .layers = {}, .tgt_padding = {}, .length = 0};
  for (auto& layer : *decoder->layers) {
    state.layers.push_back(layer->start(memory.states, capacity));
  }
  return state;
}

namespace {
// rows of x [N, L, ...] -> [rows.size(), L, ...], of each row only the first `used` positions
// along dim 1 (the rest left unwritten: a cache's positions not yet in use); not recorded.
Tensor select_rows(const Tensor& x, const std::vector<int64_t>& rows, int64_t used) {
  const Tensor c = x.contiguous();
  Shape shape = c.shape();
  const int64_t N = shape[0];
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out = empty(shape, c.dtype());
  const size_t row_bytes =
      static_cast<size_t>(c.numel() / std::max<int64_t>(N, 1)) * dtype_size(c.dtype());
  const size_t used_bytes =
      row_bytes / static_cast<size_t>(std::max<int64_t>(shape[1], 1)) * static_cast<size_t>(used);
  const auto* src =
      static_cast<const char*>(c.impl().storage->data()) + c.offset() * dtype_size(c.dtype());
  auto* dst = static_cast<char*>(out.impl().storage->data());
  for (size_t i = 0; i < rows.size(); ++i) {
    TG_ASSERT(rows[i] >= 0 && rows[i] < N);
    std::memcpy(dst + i * row_bytes, src + static_cast<size_t>(rows[i]) * row_bytes, used_bytes);
  }
  return out;
}
}  // namespace

void MiniTransformer::keep_rows(DecodeState& state, const std::vector<int64_t>& rows,
                                bool same_sources) {
  auto keep = [&](Tensor& t, int64_t used) {
    if (t.defined()) t = select_rows(t, rows, used);
  };
  auto keep_cache = [&](MultiHeadAttention::KVCache& c) {
    keep(c.keys, c.length);
    keep(c.values, c.length);
  };
  keep(state.tgt_padding, state.length);
  for (DecoderLayer::Cache& c : state.layers) keep_cache(c.self);
  if (same_sources) return;
  keep(state.memory.states, state.memory.states.size(1));
  keep(state.memory.padding, state.memory.padding.size(1));
  for (DecoderLayer::Cache& c : state.layers) keep_cache(c.cross);
}

Tensor MiniTransformer::decode_step(const Tensor& ids, DecodeState& state) {
  TG_CHECK(
      ids.dtype() == DType::Int64 && ids.dim() == 1 && ids.size(0) == state.memory.states.size(0),
      "MiniTransformer: decode_step takes int64 ids [N] for the {} rows of the state, got {} {}",
      state.memory.states.size(0), ids.dtype(), ids.shape());
  const Tensor column = unsqueeze(ids, 1);  // [N, 1]
  const Tensor pad = padding_mask(column, cfg_.pad_id);
  state.tgt_padding = state.length == 0 ? pad : concat({state.tgt_padding, pad}, 1);
  const Tensor y = embed(*tgt_embed, column, state.length);
  ++state.length;
  const Tensor x = decoder->step(y, state.layers, state.tgt_padding, state.memory.padding);
  return squeeze(project_out(x), 1);
}

MiniTransformer::Memory MiniTransformer::encode(const Tensor& src_ids) {
  const Tensor x = embed(*src_embed, src_ids);
  const Tensor padding = padding_mask(src_ids, cfg_.pad_id);
  return {encoder(x, padding), padding};
}

Tensor MiniTransformer::decode(const Tensor& tgt_ids, const Memory& memory) {
  TG_CHECK(tgt_ids.dim() == 2 && tgt_ids.size(0) == memory.states.size(0),
           "MiniTransformer: target ids {} and source batch {} differ", tgt_ids.shape(),
           memory.states.shape());
  const Tensor y = embed(*tgt_embed, tgt_ids);
  const Tensor x = decoder(y, memory.states, causal_mask(tgt_ids.size(1)),
                           padding_mask(tgt_ids, cfg_.pad_id), memory.padding);
  return project_out(x);
}

Tensor MiniTransformer::forward(const Tensor& src_ids, const Tensor& tgt_ids) {
  return decode(tgt_ids, encode(src_ids));
}

}  // namespace tapegrad::nn
