// The basic layers: values, initialisation, modes, gradchecks, errors.
#include <cmath>

#include "helpers.h"
#include "tapegrad/nn/nn.h"

using namespace tapegrad;
using namespace tapegrad::nn;
using tapegrad::testing::require_gradcheck;
using tapegrad::testing::require_values;

TEST_CASE("Linear computes x @ W^T + b", "[nn]") {
  Generator gen(0);
  Linear fixed(2, 3, gen);
  NoGradGuard no_grad;  // parameters are written in place
  for (int64_t o = 0; o < 3; ++o) {
    for (int64_t i = 0; i < 2; ++i) fixed.weight.set({o, i}, 10 * o + i);
    fixed.bias.set({o}, 100);
  }
  require_values(fixed.forward(tensor({1, 2}, {1, 2})), {100 + 2, 100 + 10 + 22, 100 + 20 + 42});
  require_values(fixed.forward(tensor({1, 2})), {102, 132, 162});  // 1-D input
  CHECK(fixed.forward(ones({4, 5, 2})).shape() == Shape{4, 5, 3});
}

TEST_CASE("initialisation follows PyTorch's defaults", "[nn]") {
  Generator gen(0);
  Linear lin(100, 50, gen);
  const double bound = 1 / std::sqrt(100.0);
  for (float w : lin.weight.to_vector<float>()) REQUIRE(std::abs(w) <= bound);
  Embedding emb(1000, 16, gen, 3);
  require_values(slice(emb.weight, 0, 3, 4), std::vector<double>(16, 0.0));  // padding row
  const Tensor w = emb.weight.detach();
  CHECK(std::abs(mean(w).item()) < 0.02);
  CHECK(std::abs(mean(mul(w, w)).item() - 1) < 0.05);  // N(0, 1)
  LayerNorm norm(4);
  require_values(norm.weight, {1, 1, 1, 1});
  require_values(norm.bias, {0, 0, 0, 0});
  CHECK(LayerNorm(4, 1e-5, false).num_parameters() == 0);
}

TEST_CASE("Dropout is the identity in eval mode and reproducible in train mode", "[nn]") {
  Generator a(1), b(1);
  Dropout d1(0.5, a), d2(0.5, b);
  const Tensor x = ones({64});
  CHECK(d1.forward(x).to_vector<float>() == d2.forward(x).to_vector<float>());
  CHECK(d1.forward(x).to_vector<float>() != d1.forward(x).to_vector<float>());  // fresh masks
  d1.eval();
  CHECK(d1.forward(x).impl_ptr() == x.impl_ptr());
}

TEST_CASE("PositionalEncoding adds the paper's sinusoids", "[nn]") {
  Generator gen(0);
  PositionalEncoding pos(4, 10, 0.0, gen);
  // pe[pos, 2i] = sin(pos / 10000^(2i/4)), pe[pos, 2i+1] = cos(...)
  require_values(slice(pos.pe, 0, 0, 1), {0, 1, 0, 1});
  require_values(slice(pos.pe, 0, 3, 4),
                 {std::sin(3.0), std::cos(3.0), std::sin(3.0 / 100), std::cos(3.0 / 100)}, 1e-6);
  const Tensor out = pos.forward(zeros({2, 3, 4}));
  require_values(slice(out, 1, 2, 3),
                 {std::sin(2.0), std::cos(2.0), std::sin(0.02), std::cos(0.02), std::sin(2.0),
                  std::cos(2.0), std::sin(0.02), std::cos(0.02)},
                 1e-6);
  CHECK_THROWS_WITH(pos.forward(zeros({1, 11, 4})),
                    "PositionalEncoding: sequence length 11 exceeds max_len 10");
  CHECK_THROWS_WITH(pos.forward(zeros({1, 2, 5})),
                    "PositionalEncoding: expected input [B, T, 4], got [1, 2, 5]");
}

TEST_CASE("basic layers gradcheck in float64", "[nn][gradcheck]") {
  Generator gen(3);
  const Tensor x = tapegrad::testing::random_leaf({2, 3, 4}, 5);
  Linear lin(4, 3, gen);
  lin.to(DType::Float64);
  auto with_x = [&](std::vector<Tensor> ps) {
    ps.push_back(x);
    return ps;
  };
  require_gradcheck([&](auto& in) { return lin.forward(in.back()); }, with_x(lin.parameters()));
  LayerNorm norm(4);
  norm.to(DType::Float64);
  require_gradcheck([&](auto& in) { return norm.forward(in.back()); }, with_x(norm.parameters()));
  Embedding emb(6, 3, gen, 0);
  emb.to(DType::Float64);
  const Tensor ids = tensor({1, 2, 5, 4}, {2, 2}, DType::Int64);
  require_gradcheck([&](auto&) { return emb.forward(ids); }, emb.parameters());
  PositionalEncoding pos(4, 8, 0.3, gen);
  pos.to(DType::Float64);
  pos.eval();  // a fresh dropout mask per call would make f random
  require_gradcheck([&](auto& in) { return pos.forward(in[0]); }, {x});
}

TEST_CASE("layer errors", "[nn][errors]") {
  Generator gen(0);
  Linear lin(4, 3, gen);
  CHECK_THROWS_WITH(lin.forward(ones({2, 5})),
                    "Linear: input of shape [2, 5] does not end in in_features 4");
  CHECK_THROWS_WITH(Linear(0, 3, gen), "Linear: sizes must be positive, got 0 -> 3");
  CHECK_THROWS_WITH(Embedding(5, 2, gen, 5),
                    "Embedding: padding_idx 5 out of range for 5 embeddings");
  CHECK_THROWS_WITH(Dropout(-0.1, gen), "Dropout: probability must be in [0, 1], got -0.1");
  CHECK_THROWS_WITH(Embedding(5, 2, gen).forward(tensor({7}, {1}, DType::Int64)),
                    "embedding: id 7 at flat position 0 of ids [1] is outside the vocabulary "
                    "[0, 5)");
}
