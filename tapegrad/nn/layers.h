// The basic layers: Linear, Dropout, Embedding, LayerNorm, the activations, and the sinusoidal
// PositionalEncoding. Initialisation follows PyTorch's defaults; random init draws from the
// Generator passed to the constructor, so a model is reproduced from its seed.
#pragma once

#include <optional>

#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/layernorm.h"
#include "tapegrad/autograd/ops/matmul.h"
#include "tapegrad/autograd/random.h"
#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

// y = x @ weight^T + bias.  x [..., in] -> [..., out]; weight [out, in], bias [out].
// weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)), as torch.nn.Linear.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, Generator& gen, bool bias = true);
  Tensor forward(const Tensor& x) const;

  Tensor weight;
  Tensor bias;  // undefined without bias
};

// Inverted dropout while training, the identity in eval mode. Owns its generator, seeded from
// the one given at construction.
class Dropout : public Module {
 public:
  Dropout(double p, Generator& gen);
  Tensor forward(const Tensor& x);
  // p, in training or not, and the generator its masks are drawn from: what a fused op takes
  DropoutOptions options() { return {.p = p_, .training = is_training(), .gen = &gen_}; }
  Generator& generator() { return gen_; }

 private:
  double p_;
  Generator gen_;
};

// ids int64 [...] -> [..., dim]; weight [num, dim] ~ N(0, init_std^2) with the padding row
// zero; init_std 1 is torch.nn.Embedding's default. The padding row receives no gradient.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, Generator& gen,
            std::optional<int64_t> padding_idx = std::nullopt, double init_std = 1.0);
  Tensor forward(const Tensor& ids) const;

  Tensor weight;

 private:
  std::optional<int64_t> padding_idx_;
};

// Normalises the last dim [..., C]; weight ones and bias zeros when affine.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t C, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) const;

  Tensor weight;  // undefined unless affine
  Tensor bias;
  double eps() const { return eps_; }

 private:
  double eps_;
};

// A position-wise feed-forward's first half, dropout(activation(linear(x))), as one op: the
// activation and the dropout run in the product's output pass (LinearEpilogue). A module call
// of `linear`.
Tensor linear_activation_dropout(const Linear& linear, const Tensor& x, Activation activation,
                                 Dropout& dropout);

// The residual stream between a layer's sublayers: x, and in pre-norm the next sublayer's input
// norm(x) when the add that made x computed it too (undefined: not computed).
struct Residual {
  Tensor x;
  Tensor normed;
};

// A residual sublayer (the Annotated Transformer's SublayerConnection) over its layer's norm and
// dropout: post-norm x -> norm(x + dropout(f(x))), pre-norm x -> x + dropout(f(norm(x))). Each
// add is one op beneath (add_layer_norm; in pre-norm add_and_layer_norm, which applies the next
// sublayer's norm, `next`, in the same pass) and a module call of the norm it applies.
class SublayerConnection {
 public:
  SublayerConnection() = default;
  SublayerConnection(LayerNorm& norm, Dropout& dropout, bool norm_first,
                     const LayerNorm* next = nullptr)
      : norm_(&norm), next_(next), dropout_(&dropout), norm_first_(norm_first) {}

  template <class F>
  Residual operator()(const Residual& in, F&& sublayer) const {
    if (!norm_first_) return {add_norm(in.x, sublayer(in.x)), Tensor()};
    return add(in.x, sublayer(in.normed.defined() ? in.normed : call(*norm_, in.x)));
  }

 private:
  Tensor add_norm(const Tensor& x, const Tensor& d) const;
  Residual add(const Tensor& x, const Tensor& d) const;

  LayerNorm* norm_ = nullptr;
  const LayerNorm* next_ = nullptr;
  Dropout* dropout_ = nullptr;
  bool norm_first_ = false;
};

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) const { return relu(x); }
};

class GELU : public Module {
 public:
  GELU() : Module("GELU") {}
  Tensor forward(const Tensor& x) const { return gelu(x); }
};

// x [B, T, C] -> dropout(x + pe[:T]), with pe the paper's sinusoids (section 3.5):
// pe[pos, 2i] = sin(pos / 10000^(2i/C)), pe[pos, 2i+1] = cos(pos / 10000^(2i/C)).
// pe [max_len, C] is a buffer. T > max_len is an error.
class PositionalEncoding : public Module {
 public:
  PositionalEncoding(int64_t C, int64_t max_len, double dropout, Generator& gen);
  // x [B, T, C] holds positions start .. start + T - 1 (start > 0 when decoding step by step)
  Tensor forward(const Tensor& x, int64_t start = 0);

  Tensor pe;

 private:
  Child<Dropout> dropout_;
};

}  // namespace tapegrad::nn
