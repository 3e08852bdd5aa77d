#include "nn/transformer.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "autograd/ops/matmul.h"
#include "autograd/ops/shape.h"

namespace tapegrad::nn {

PositionwiseFeedForward::PositionwiseFeedForward(const LayerConfig& cfg, Generator& gen)
    : Module("PositionwiseFeedForward"), activation_(cfg.activation) {
  linear1 = register_module("linear1", std::make_shared<Linear>(cfg.d_model, cfg.d_ff, gen));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(cfg.dropout, gen));
  linear2 = register_module("linear2", std::make_shared<Linear>(cfg.d_ff, cfg.d_model, gen));
}

Tensor PositionwiseFeedForward::forward(const Tensor& x) {
  const Tensor h = linear1->forward(x);
  const Tensor a = activation_ == Activation::ReLU ? relu(h) : gelu(h);
  return traced(linear2->forward(dropout_->forward(a)));
}

EncoderLayer::EncoderLayer(const LayerConfig& cfg, Generator& gen)
    : Module("EncoderLayer"), norm_first_(cfg.norm_first) {
  self_attn = register_module(
      "self_attn", std::make_shared<MultiHeadAttention>(cfg.d_model, cfg.heads, cfg.dropout, gen));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(cfg.dropout, gen));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(cfg.d_model));
  feed_forward =
      register_module("feed_forward", std::make_shared<PositionwiseFeedForward>(cfg, gen));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(cfg.dropout, gen));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(cfg.d_model));
}

Tensor EncoderLayer::forward(const Tensor& input, const Tensor& padding) {
  Tensor x = input;
  const AttentionMasks masks{.key_padding = padding};
  if (norm_first_) {
    // self-attention, then feed-forward, each on a normalised copy added back
    const Tensor n1 = norm1->forward(x);
    x = x + dropout1_->forward(self_attn->forward(n1, n1, n1, masks));
    x = x + dropout2_->forward(feed_forward->forward(norm2->forward(x)));
  } else {
    // self-attention
    x = norm1->forward(x + dropout1_->forward(self_attn->forward(x, x, x, masks)));  // add & norm
    // feed-forward
    x = norm2->forward(x + dropout2_->forward(feed_forward->forward(x)));  // add & norm
  }
  return traced(x);
}

Encoder::Encoder(const LayerConfig& cfg, int64_t num_layers, bool final_norm, Generator& gen)
    : Module("Encoder") {
  TG_CHECK(num_layers >= 0, "Encoder: negative number of layers {}", num_layers);
  layers = register_module("layers", std::make_shared<ModuleList<EncoderLayer>>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<EncoderLayer>(cfg, gen));
  if (final_norm) norm = register_module("norm", std::make_shared<LayerNorm>(cfg.d_model));
}

Tensor Encoder::forward(const Tensor& input, const Tensor& padding) {
  Tensor x = input;
  for (const auto& layer : *layers) x = layer->forward(x, padding);
  if (norm) x = norm->forward(x);
  return traced(x);
}

DecoderLayer::DecoderLayer(const LayerConfig& cfg, Generator& gen)
    : Module("DecoderLayer"), norm_first_(cfg.norm_first) {
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
}

Tensor DecoderLayer::forward(const Tensor& input, const Tensor& memory, const Tensor& self_mask,
                             const Tensor& tgt_padding, const Tensor& memory_padding) {
  Tensor x = input;
  const AttentionMasks self_masks{.key_padding = tgt_padding, .attn = self_mask};
  const AttentionMasks cross_masks{.key_padding = memory_padding};
  if (norm_first_) {
    const Tensor n1 = norm1->forward(x);
    x = x + dropout1_->forward(self_attn->forward(n1, n1, n1, self_masks));
    x = x + dropout2_->forward(cross_attn->forward(norm2->forward(x), memory, memory, cross_masks));
    x = x + dropout3_->forward(feed_forward->forward(norm3->forward(x)));
  } else {
    // masked self-attention
    x = norm1->forward(x + dropout1_->forward(self_attn->forward(x, x, x, self_masks)));
    // cross-attention over the encoder memory
    x = norm2->forward(x + dropout2_->forward(cross_attn->forward(x, memory, memory, cross_masks)));
    // feed-forward
    x = norm3->forward(x + dropout3_->forward(feed_forward->forward(x)));
  }
  return traced(x);
}

Decoder::Decoder(const LayerConfig& cfg, int64_t num_layers, bool final_norm, Generator& gen)
    : Module("Decoder") {
  TG_CHECK(num_layers >= 0, "Decoder: negative number of layers {}", num_layers);
  layers = register_module("layers", std::make_shared<ModuleList<DecoderLayer>>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<DecoderLayer>(cfg, gen));
  if (final_norm) norm = register_module("norm", std::make_shared<LayerNorm>(cfg.d_model));
}

Tensor Decoder::forward(const Tensor& input, const Tensor& memory, const Tensor& self_mask,
                        const Tensor& tgt_padding, const Tensor& memory_padding) {
  Tensor x = input;
  for (const auto& layer : *layers) {
    x = layer->forward(x, memory, self_mask, tgt_padding, memory_padding);
  }
  if (norm) x = norm->forward(x);
  return traced(x);
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

std::string MiniTransformerConfig::to_json() const {
  const nlohmann::json j = {
      {"src_vocab", src_vocab},   {"tgt_vocab", tgt_vocab},
      {"d_model", d_model},       {"heads", heads},
      {"d_ff", d_ff},             {"encoder_layers", encoder_layers},
      {"decoder_layers", decoder_layers}, {"dropout", dropout},
      {"max_len", max_len},       {"pad_id", pad_id},
      {"activation", activation == Activation::ReLU ? "relu" : "gelu"},
      {"norm_first", norm_first}, {"share_embeddings", share_embeddings},
      {"tie_output", tie_output}, {"seed", seed}};
  return j.dump();
}

MiniTransformerConfig MiniTransformerConfig::from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  TG_CHECK(j.is_object(), "MiniTransformerConfig: not a JSON object: {}", text);
  MiniTransformerConfig c;
  try {
    c.src_vocab = j.at("src_vocab").get<int64_t>();
    c.tgt_vocab = j.at("tgt_vocab").get<int64_t>();
    c.d_model = j.at("d_model").get<int64_t>();
    c.heads = j.at("heads").get<int64_t>();
    c.d_ff = j.at("d_ff").get<int64_t>();
    c.encoder_layers = j.at("encoder_layers").get<int64_t>();
    c.decoder_layers = j.at("decoder_layers").get<int64_t>();
    c.dropout = j.at("dropout").get<double>();
    c.max_len = j.at("max_len").get<int64_t>();
    c.pad_id = j.at("pad_id").get<int64_t>();
    const std::string act = j.at("activation").get<std::string>();
    TG_CHECK(act == "relu" || act == "gelu", "MiniTransformerConfig: unknown activation '{}'", act);
    c.activation = act == "relu" ? Activation::ReLU : Activation::GELU;
    c.norm_first = j.at("norm_first").get<bool>();
    c.share_embeddings = j.at("share_embeddings").get<bool>();
    c.tie_output = j.at("tie_output").get<bool>();
    c.seed = j.at("seed").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("MiniTransformerConfig: {}", e.what()));
  }
  return c;
}

MiniTransformer::MiniTransformer(const MiniTransformerConfig& cfg)
    : Module("MiniTransformer"), cfg_(cfg) {
  TG_CHECK(cfg.src_vocab > 0 && cfg.tgt_vocab > 0,
           "MiniTransformer: vocabulary sizes must be positive, got src {} tgt {}", cfg.src_vocab,
           cfg.tgt_vocab);
  TG_CHECK(!cfg.share_embeddings || cfg.src_vocab == cfg.tgt_vocab,
           "MiniTransformer: share_embeddings needs equal vocabularies, got {} and {}",
           cfg.src_vocab, cfg.tgt_vocab);
  Generator gen(cfg.seed);
  // Embeddings start at N(0, 1/C), so after the sqrt(C) scaling in embed() tokens have unit
  // variance, the scale of the positional encoding (fairseq's choice). With PyTorch's N(0, 1)
  // they would be sqrt(C) times louder and drown out the positions.
  const double embed_std = 1.0 / std::sqrt(static_cast<double>(cfg.d_model));
  src_embed = register_module("src_embed", std::make_shared<Embedding>(cfg.src_vocab, cfg.d_model,
                                                                       gen, cfg.pad_id, embed_std));
  tgt_embed = cfg.share_embeddings
                  ? src_embed
                  : register_module("tgt_embed",
                                    std::make_shared<Embedding>(cfg.tgt_vocab, cfg.d_model, gen,
                                                                cfg.pad_id, embed_std));
  positional = register_module(
      "positional", std::make_shared<PositionalEncoding>(cfg.d_model, cfg.max_len, cfg.dropout, gen));
  encoder = register_module(
      "encoder", std::make_shared<Encoder>(cfg.layer(), cfg.encoder_layers, cfg.norm_first, gen));
  decoder = register_module(
      "decoder", std::make_shared<Decoder>(cfg.layer(), cfg.decoder_layers, cfg.norm_first, gen));
  if (cfg.tie_output) {
    out_bias = zeros({cfg.tgt_vocab});
    register_parameter("out_bias", out_bias);
  } else {
    out_proj = register_module("out_proj",
                               std::make_shared<Linear>(cfg.d_model, cfg.tgt_vocab, gen));
  }
}

// ids [B, L] -> positional(embedding(ids) * sqrt(C)) [B, L, C] (section 3.4 of the paper)
Tensor MiniTransformer::embed(const Embedding& table, const Tensor& ids) {
  TG_CHECK(ids.dtype() == DType::Int64 && ids.dim() == 2 && ids.size(0) > 0 && ids.size(1) > 0,
           "MiniTransformer: token ids must be int64 [B, L] with B, L > 0, got {} {}", ids.dtype(),
           ids.shape());
  return positional->forward(table.forward(ids) * std::sqrt(static_cast<double>(cfg_.d_model)));
}

MiniTransformer::Memory MiniTransformer::encode(const Tensor& src_ids) {
  const Tensor x = embed(*src_embed, src_ids);
  const Tensor padding = padding_mask(src_ids, cfg_.pad_id);
  return {encoder->forward(x, padding), padding};
}

Tensor MiniTransformer::decode(const Tensor& tgt_ids, const Memory& memory) {
  TG_CHECK(tgt_ids.dim() == 2 && tgt_ids.size(0) == memory.states.size(0),
           "MiniTransformer: target ids {} and source batch {} differ", tgt_ids.shape(),
           memory.states.shape());
  const Tensor y = embed(*tgt_embed, tgt_ids);
  const Tensor x = decoder->forward(y, memory.states, causal_mask(tgt_ids.size(1)),
                                    padding_mask(tgt_ids, cfg_.pad_id), memory.padding);
  if (out_proj) return traced(out_proj->forward(x));
  return traced(matmul(x, transpose(tgt_embed->weight, 0, 1)) + out_bias);
}

Tensor MiniTransformer::forward(const Tensor& src_ids, const Tensor& tgt_ids) {
  return decode(tgt_ids, encode(src_ids));
}

}  // namespace tapegrad::nn
