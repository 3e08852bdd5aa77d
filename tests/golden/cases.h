// The golden cases: the modules that tests/golden/make_golden.py (PyTorch, written from the
// papers) holds tapegrad to, built here for both export.cpp, which writes their weights, and
// tests/nn/test_golden.cpp, which compares what tapegrad computes with the committed numbers.
// Small on purpose (d_model 8, two heads, two layers): every wiring choice is exercised and
// the committed files stay a few tens of kilobytes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tapegrad/nn/language_model.h"
#include "tapegrad/nn/transformer.h"

namespace tapegrad::golden {

enum class Kind { Encoder, Decoder, Mini, LanguageModel };

struct Case {
  std::string name;  // the file tests/golden/<name>.safetensors
  Kind kind;
  bool norm_first;  // pre-norm cases also take GELU and, for the model, shared embeddings and
                    // a tied output, so each option is covered once against the reference
};

inline const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"encoder_post", Kind::Encoder, false}, {"encoder_pre", Kind::Encoder, true},
      {"decoder_post", Kind::Decoder, false}, {"decoder_pre", Kind::Decoder, true},
      {"mini_post", Kind::Mini, false},       {"mini_pre", Kind::Mini, true},
      {"lm", Kind::LanguageModel, true},
  };
  return all;
}

constexpr int64_t kLayers = 2;

inline nn::LayerConfig layer_config(bool norm_first) {
  return {.d_model = 8,
          .heads = 2,
          .d_ff = 16,
          .dropout = 0.0,
          .activation = norm_first ? Activation::GELU : Activation::ReLU,
          .norm_first = norm_first};
}

inline nn::MiniTransformerConfig mini_config(bool norm_first) {
  const nn::LayerConfig l = layer_config(norm_first);
  return {.src_vocab = 11,
          .tgt_vocab = norm_first ? 11 : 9,
          .d_model = l.d_model,
          .heads = l.heads,
          .d_ff = l.d_ff,
          .encoder_layers = kLayers,
          .decoder_layers = kLayers,
          .dropout = 0.0,
          .max_len = 16,
          .pad_id = 0,
          .activation = l.activation,
          .norm_first = norm_first,
          .share_embeddings = norm_first,
          .tie_output = norm_first,
          .seed = 5};
}

// The language model's block is 8, so the golden continuation slides past it.
inline nn::LanguageModelConfig lm_config() {
  return {.vocab = 11,
          .d_model = 8,
          .heads = 2,
          .d_ff = 16,
          .layers = kLayers,
          .block_size = 8,
          .seed = 5};
}

// The case's module in float64; its weights are whatever `seed` draws for a stack, or the
// config's own seed for the model (the test loads the committed ones over them).
inline std::shared_ptr<nn::Module> build(const Case& c, uint64_t seed = 3) {
  Generator gen(seed);
  std::shared_ptr<nn::Module> m;
  switch (c.kind) {
    case Kind::Encoder:
      m = std::make_shared<nn::Encoder>(layer_config(c.norm_first), kLayers, c.norm_first, gen);
      break;
    case Kind::Decoder:
      m = std::make_shared<nn::Decoder>(layer_config(c.norm_first), kLayers, c.norm_first, gen);
      break;
    case Kind::Mini: m = std::make_shared<nn::MiniTransformer>(mini_config(c.norm_first)); break;
    case Kind::LanguageModel: m = std::make_shared<nn::LanguageModel>(lm_config()); break;
  }
  m->to(DType::Float64);
  return m;
}

}  // namespace tapegrad::golden
