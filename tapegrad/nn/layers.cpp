// The basic layers: Linear, Dropout, Embedding, LayerNorm and the sinusoidal positional
// encoding, with their initialisation.
#include "tapegrad/nn/layers.h"

#include <cmath>

#include "tapegrad/autograd/ops/dropout.h"
#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/embedding.h"
#include "tapegrad/autograd/ops/layernorm.h"
#include "tapegrad/autograd/ops/matmul.h"
#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/autograd/tape.h"

namespace tapegrad::nn {

Linear::Linear(int64_t in_features, int64_t out_features, Generator& gen, bool with_bias)
    : Module("Linear") {
  TG_CHECK(in_features > 0 && out_features > 0, "Linear: sizes must be positive, got {} -> {}",
           in_features, out_features);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  weight = uniform({out_features, in_features}, -bound, bound, gen);
  register_parameter("weight", weight);
  if (with_bias) {
    bias = uniform({out_features}, -bound, bound, gen);
    register_parameter("bias", bias);
  }
}

Tensor Linear::forward(const Tensor& x) const {
  TG_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1),
           "Linear: input of shape {} does not end in in_features {}", x.shape(), weight.size(1));
  return linear(x, weight, bias);
}

Tensor linear_activation_dropout(const Linear& linear, const Tensor& x, Activation activation,
                                 Dropout& dropout) {
  const auto profiled_scope = linear.profiled();
  return linear.traced(tapegrad::linear(x, linear.weight, linear.bias,
                                        {.activation = activation, .dropout = dropout.options()}));
}

Dropout::Dropout(double p, Generator& gen) : Module("Dropout"), p_(p), gen_(gen.next_u64()) {
  TG_CHECK(p >= 0 && p <= 1, "Dropout: probability must be in [0, 1], got {}", p);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p_, is_training(), gen_); }

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Generator& gen,
                     std::optional<int64_t> padding_idx, double init_std)
    : Module("Embedding"), padding_idx_(padding_idx) {
  TG_CHECK(num_embeddings > 0 && dim > 0, "Embedding: sizes must be positive, got [{}, {}]",
           num_embeddings, dim);
  TG_CHECK(!padding_idx || (*padding_idx >= 0 && *padding_idx < num_embeddings),
           "Embedding: padding_idx {} out of range for {} embeddings", *padding_idx,
           num_embeddings);
  weight = normal({num_embeddings, dim}, 0.0, init_std, gen);
  for (int64_t c = 0; padding_idx && c < dim; ++c) weight.set({*padding_idx, c}, 0.0);
  register_parameter("weight", weight);
}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(weight, ids, padding_idx_); }

LayerNorm::LayerNorm(int64_t C, double eps, bool affine) : Module("LayerNorm"), eps_(eps) {
  TG_CHECK(C > 0, "LayerNorm: size must be positive, got {}", C);
  if (affine) {
    weight = ones({C});
    bias = zeros({C});
    register_parameter("weight", weight);
    register_parameter("bias", bias);
  }
}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, weight, bias, eps_); }

// post-norm: norm(x + dropout(d)), one op
Tensor SublayerConnection::add_norm(const Tensor& x, const Tensor& d) const {
  const auto profiled_scope = norm_->profiled();
  return norm_->traced(
      add_layer_norm(x, d, norm_->weight, norm_->bias, norm_->eps(), dropout_->options()));
}

// pre-norm: the stream x + dropout(d), and with a next sublayer its input next(x + dropout(d))
Residual SublayerConnection::add(const Tensor& x, const Tensor& d) const {
  if (!next_) return {x + call(*dropout_, d), Tensor()};
  const auto profiled_scope = next_->profiled();
  const SumNorm r =
      add_and_layer_norm(x, d, next_->weight, next_->bias, next_->eps(), dropout_->options());
  next_->traced(r.norm);
  return {r.sum, r.norm};
}

PositionalEncoding::PositionalEncoding(int64_t C, int64_t max_len, double p, Generator& gen)
    : Module("PositionalEncoding") {
  TG_CHECK(C > 0 && max_len > 0, "PositionalEncoding: sizes must be positive, got C {} max_len {}",
           C, max_len);
  pe = empty({max_len, C});
  float* table = pe.data<float>();
  for (int64_t pos = 0; pos < max_len; ++pos) {
    for (int64_t i = 0; i < C; ++i) {
      const double rate =
          std::pow(10000.0, -static_cast<double>(i - i % 2) / static_cast<double>(C));
      const double angle = static_cast<double>(pos) * rate;
      table[pos * C + i] = static_cast<float>(i % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  }
  register_buffer("pe", pe);
  dropout_ = register_module("dropout", std::make_shared<Dropout>(p, gen));
}

Tensor PositionalEncoding::forward(const Tensor& x, int64_t start) {
  TG_CHECK(x.dim() == 3 && x.size(2) == pe.size(1),
           "PositionalEncoding: expected input [B, T, {}], got {}", pe.size(1), x.shape());
  TG_CHECK(start >= 0 && start + x.size(1) <= pe.size(0),
           "PositionalEncoding: sequence length {} exceeds max_len {}", start + x.size(1),
           pe.size(0));
  return dropout_(x + slice(pe, 0, start, start + x.size(1)));
}

}  // namespace tapegrad::nn
