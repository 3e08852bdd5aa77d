// The decoder-only language model: its config's checks and size, GPT-2's initialisation, the
// forward pass and the incremental step that sampling runs.
#include "tapegrad/nn/language_model.h"

#include <cmath>

#include "tapegrad/autograd/ops/matmul.h"
#include "tapegrad/autograd/ops/shape_ops.h"

namespace tapegrad::nn {

LayerConfig LanguageModelConfig::layer() const {
  return {.d_model = d_model,
          .heads = heads,
          .d_ff = d_ff,
          .dropout = dropout,
          .activation = Activation::GELU,
          .norm_first = true};
}

void LanguageModelConfig::check() const {
  std::vector<std::string> problems;
  check_range(problems, "vocab", vocab, 1, kConfigLimits.vocab);
  check_layer_config(layer(), problems);
  check_range(problems, "layers", layers, 1, kConfigLimits.layers);
  check_range(problems, "block_size", block_size, 1, kConfigLimits.max_len);
  if (problems.empty() && state_elements() > kConfigLimits.state_elements) {
    problems.push_back(fmt::format("the model would hold {} elements, over the limit of {}",
                                   state_elements(), kConfigLimits.state_elements));
  }
  TG_CHECK(problems.empty(), "LanguageModelConfig: {}", fmt::join(problems, "; "));
}

int64_t LanguageModelConfig::state_elements() const {
  // embeddings, the layers, the final norm; the tied output projection has no weights of its own
  return (vocab + block_size) * d_model + layers * layer_elements(layer(), false) + 2 * d_model;
}

LanguageModel::LanguageModel(const LanguageModelConfig& cfg) : Module("LanguageModel"), cfg_(cfg) {
  cfg.check();
  Generator gen(cfg.seed);
  tok_embed =
      register_module("tok_embed", std::make_shared<Embedding>(cfg.vocab, cfg.d_model, gen));
  pos_embed =
      register_module("pos_embed", std::make_shared<Embedding>(cfg.block_size, cfg.d_model, gen));
  dropout = register_module("dropout", std::make_shared<Dropout>(cfg.dropout, gen));
  layers = register_module("layers", std::make_shared<ModuleList<EncoderLayer>>());
  for (int64_t i = 0; i < cfg.layers; ++i)
    layers->push_back(std::make_shared<EncoderLayer>(cfg.layer(), gen));
  norm = register_module("norm", std::make_shared<LayerNorm>(cfg.d_model));
  // GPT-2's initialisation, drawn again over the modules' own in registration order
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.layers));
  for (const auto& [name, p] : named_parameters()) {
    if (p.dim() == 1) {
      if (name.ends_with(".bias") && name.find("norm") == std::string::npos)
        assign(name, zeros(p.shape()));
      continue;
    }
    const bool ends_branch = name.ends_with("out_proj.weight") || name.ends_with("linear2.weight");
    assign(name, normal(p.shape(), 0.0, ends_branch ? residual_std : 0.02, gen));
  }
}

// ids [B, L] at positions start.. -> dropout(tok_embed(ids) + pos_embed(positions)) [B, L, C]
Tensor LanguageModel::embed(const Tensor& ids, int64_t start) {
  TG_CHECK(ids.dtype() == DType::Int64 && ids.dim() == 2 && ids.size(0) > 0 && ids.size(1) > 0,
           "LanguageModel: token ids must be int64 [B, T] with B, T > 0, got {} {}", ids.dtype(),
           ids.shape());
  TG_CHECK(start + ids.size(1) <= cfg_.block_size,
           "LanguageModel: positions {} to {} are past the block size {}", start,
           start + ids.size(1) - 1, cfg_.block_size);
  const Tensor positions = arange(static_cast<double>(start),
                                  static_cast<double>(start + ids.size(1)));  // [L]
  return dropout(call(*tok_embed, ids) + call(*pos_embed, positions));
}

Tensor LanguageModel::forward(const Tensor& ids) {
  Tensor x = embed(ids, 0);
  const Tensor mask = causal_mask(ids.size(1));
  for (const auto& layer : *layers) x = layer(x, Tensor(), mask);
  return project_out(norm(x));
}

// x [..., C] -> logits [..., V]: the output projection is the token embedding (weight tying)
Tensor LanguageModel::project_out(const Tensor& x) {
  return matmul(x, transpose(tok_embed->weight, 0, 1));
}

LanguageModel::DecodeState LanguageModel::start_decoding(int64_t batch, int64_t capacity) {
  TG_CHECK(batch >= 1 && capacity >= 1 && capacity <= cfg_.block_size,
           "LanguageModel: decoding {} rows of {} positions: need at least one of each, and at "
           "most the block size {}",
           batch, capacity, cfg_.block_size);
  DecodeState state;
  for (auto& layer : *layers)
    state.layers.push_back(
        layer->self_attn->empty_cache(batch, capacity, tok_embed->weight.dtype()));
  return state;
}

Tensor LanguageModel::decode_step(const Tensor& ids, DecodeState& state) {
  TG_CHECK(ids.dtype() == DType::Int64 && ids.dim() == 1 && !state.layers.empty() &&
               ids.size(0) == state.layers[0].keys.size(0),
           "LanguageModel: decode_step takes int64 ids [N] for the rows of the state, got {} {}",
           ids.dtype(), ids.shape());
  Tensor x = embed(unsqueeze(ids, 1), state.length);  // [N, 1, C]
  ++state.length;
  for (size_t i = 0; i < state.layers.size(); ++i) x = (*layers)[i].step(x, state.layers[i]);
  return squeeze(project_out(norm(x)), 1);
}

}  // namespace tapegrad::nn
