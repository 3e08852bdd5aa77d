// Encoder-only models: the shared encoder, the sequence classifier (pooled) and the token
// classifier (a label per position).
#include "tapegrad/nn/heads.h"

#include <cmath>

#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/ops/shape_ops.h"

namespace tapegrad::nn {

EncoderOnlyModel::EncoderOnlyModel(std::string type_name, const EncoderClassifierConfig& cfg)
    : Module(std::move(type_name)), cfg_(cfg) {
  Generator gen(cfg.seed);
  TG_CHECK(cfg.vocab > 0 && cfg.classes > 0,
           "{}: vocab and classes must be positive, got {} and {}", this->type_name(), cfg.vocab,
           cfg.classes);
  const LayerConfig layer{.d_model = cfg.d_model,
                          .heads = cfg.heads,
                          .d_ff = cfg.d_ff,
                          .dropout = cfg.dropout,
                          .activation = cfg.activation,
                          .norm_first = cfg.norm_first};
  // N(0, 1/C) and the sqrt(C) scaling: unit-variance tokens, as in MiniTransformer
  embed = register_module(
      "embed", std::make_shared<Embedding>(cfg.vocab, cfg.d_model, gen, cfg.pad_id,
                                           1.0 / std::sqrt(static_cast<double>(cfg.d_model))));
  positional = register_module("positional", std::make_shared<PositionalEncoding>(
                                                 cfg.d_model, cfg.max_len, cfg.dropout, gen));
  encoder =
      register_module("encoder", std::make_shared<Encoder>(layer, cfg.layers, cfg.norm_first, gen));
  head = register_module("head", std::make_shared<Linear>(cfg.d_model, cfg.classes, gen));
}

std::pair<Tensor, Tensor> EncoderOnlyModel::encode(const Tensor& ids) {
  TG_CHECK(ids.dtype() == DType::Int64 && ids.dim() == 2 && ids.size(0) > 0 && ids.size(1) > 0,
           "{}: token ids must be int64 [B, S] with B, S > 0, got {} {}", type_name(), ids.dtype(),
           ids.shape());
  const Tensor padding = padding_mask(ids, cfg_.pad_id);
  const Tensor x = positional(embed(ids) * std::sqrt(static_cast<double>(cfg_.d_model)));
  return {encoder(x, padding), padding};
}

SequenceClassifier::SequenceClassifier(const EncoderClassifierConfig& cfg)
    : EncoderOnlyModel("SequenceClassifier", cfg) {}

Tensor SequenceClassifier::forward(const Tensor& ids) {
  auto [states, padding] = encode(ids);
  // mean over the non-pad positions: sum(states * keep) / count, keep [B, S, 1]
  const Tensor keep = unsqueeze(eq(padding, 0).to(states.dtype()), -1);
  const Tensor count = sum(keep, {1});  // [B, 1]
  for (int64_t b = 0; b < count.size(0); ++b) {
    TG_CHECK(count.at({b, 0}) > 0, "SequenceClassifier: sequence {} of ids {} is all padding", b,
             ids.shape());
  }
  const Tensor pooled = sum(states * keep, {1}) / count;  // [B, C]
  return head(pooled);
}

TokenClassifier::TokenClassifier(const EncoderClassifierConfig& cfg)
    : EncoderOnlyModel("TokenClassifier", cfg) {}

Tensor TokenClassifier::forward(const Tensor& ids) { return head(encode(ids).first); }

}  // namespace tapegrad::nn
