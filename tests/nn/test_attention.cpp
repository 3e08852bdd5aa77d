// Multi-head attention: shapes, the mask convention, weights, gradchecks, errors.
#include <cmath>

#include "helpers.h"
#include "tapegrad/nn/nn.h"

using namespace tapegrad;
using namespace tapegrad::nn;
using tapegrad::testing::random_leaf;
using tapegrad::testing::require_gradcheck;
using tapegrad::testing::require_values;

namespace {
Tensor randn(const Shape& s, uint64_t seed) {
  Generator g(seed);
  return normal(s, 0, 1, g);
}
}  // namespace

TEST_CASE("causal and padding masks: true means blocked", "[nn]") {
  require_values(causal_mask(3), {0, 1, 1, 0, 0, 1, 0, 0, 0});
  require_values(padding_mask(tensor({5, 6, 0, 0}, {2, 2}, DType::Int64), 0), {0, 0, 1, 1});
}

TEST_CASE("attention weights: shapes, rows sum to one, padded keys get exactly zero", "[nn]") {
  Generator gen(0);
  MultiHeadAttention mha(8, 2, 0.0, gen);
  mha.keep_weights(true);
  const Tensor q = randn({2, 3, 8}, 1), kv = randn({2, 5, 8}, 2);
  const Tensor pad = eq(tensor({0, 0, 0, 1, 1, 0, 0, 0, 0, 1}, {2, 5}), 1);
  const Tensor out = mha.forward(q, kv, kv, {.key_padding = pad});
  CHECK(out.shape() == Shape{2, 3, 8});
  const Tensor w = mha.last_weights();
  REQUIRE(w.shape() == Shape{2, 2, 3, 5});
  require_values(sum(w, {-1}), std::vector<double>(12, 1.0), 1e-6);
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t t = 0; t < 3; ++t) {
      CHECK(w.at({0, h, t, 3}) == 0);
      CHECK(w.at({0, h, t, 4}) == 0);
      CHECK(w.at({1, h, t, 4}) == 0);
      CHECK(w.at({1, h, t, 3}) > 0);
    }
  }
}

TEST_CASE("changing a padded key leaves the output unchanged", "[nn]") {
  Generator gen(0);
  MultiHeadAttention mha(8, 2, 0.0, gen);
  const Tensor q = randn({1, 3, 8}, 1);
  Tensor kv = randn({1, 4, 8}, 2);
  const Tensor pad = eq(tensor({0, 0, 0, 1}, {1, 4}), 1);
  const auto before = mha.forward(q, kv, kv, {.key_padding = pad}).to_vector<float>();
  NoGradGuard no_grad;
  for (int64_t c = 0; c < 8; ++c) kv.set({0, 3, c}, 1000.0);
  CHECK(mha.forward(q, kv, kv, {.key_padding = pad}).to_vector<float>() == before);
  CHECK(mha.forward(q, kv, kv).to_vector<float>() != before);  // without the mask it matters
}

TEST_CASE("a causal mask hides the future", "[nn]") {
  Generator gen(0);
  MultiHeadAttention mha(8, 4, 0.0, gen);
  Tensor x = randn({1, 5, 8}, 3);
  const Tensor before = mha.forward(x, x, x, {.attn = causal_mask(5)});
  NoGradGuard no_grad;
  for (int64_t c = 0; c < 8; ++c) x.set({0, 4, c}, -7.0);  // change only the last position
  const Tensor after = mha.forward(x, x, x, {.attn = causal_mask(5)});
  CHECK(slice(after, 1, 0, 4).to_vector<float>() == slice(before, 1, 0, 4).to_vector<float>());
  CHECK(slice(after, 1, 4, 5).to_vector<float>() != slice(before, 1, 4, 5).to_vector<float>());
}

TEST_CASE("a query whose every key is masked gets zeros, not NaN", "[nn]") {
  Generator gen(0);
  MultiHeadAttention mha(4, 1, 0.0, gen);
  mha.keep_weights(true);
  const Tensor x = randn({1, 2, 4}, 4);
  const Tensor all = ones({2, 2}, DType::Bool);
  const Tensor out = mha.forward(x, x, x, {.attn = eq(tensor({0, 0, 1, 1}, {2, 2}), 1)});
  for (float v : out.to_vector<float>()) CHECK(std::isfinite(v));
  require_values(slice(mha.last_weights(), 2, 1, 2), {0, 0});
  for (float v : mha.forward(x, x, x, {.attn = all}).to_vector<float>()) CHECK(std::isfinite(v));
}

TEST_CASE("multi-head attention gradchecks with masks", "[nn][gradcheck]") {
  Generator gen(0);
  MultiHeadAttention mha(6, 3, 0.0, gen);
  mha.to(DType::Float64);
  const Tensor q = random_leaf({2, 3, 6}, 1), kv = random_leaf({2, 4, 6}, 2);
  const Tensor pad = eq(tensor({0, 0, 0, 1, 0, 0, 1, 1}, {2, 4}), 1);
  std::vector<Tensor> inputs = mha.parameters();
  inputs.push_back(q);
  inputs.push_back(kv);
  // cross-attention with key padding
  require_gradcheck(
      [&](auto& in) { return mha.forward(in[8], in[9], in[9], {.key_padding = pad}); }, inputs);
  // self-attention with a causal mask
  require_gradcheck(
      [&](auto& in) { return mha.forward(in[9], in[9], in[9], {.attn = causal_mask(4)}); }, inputs);
}

TEST_CASE("attention errors", "[nn][errors]") {
  Generator gen(0);
  CHECK_THROWS_WITH(MultiHeadAttention(10, 3, 0.0, gen),
                    "MultiHeadAttention: d_model 10 is not divisible by 3 heads");
  MultiHeadAttention mha(8, 2, 0.0, gen);
  const Tensor x = ones({2, 3, 8});
  CHECK_THROWS_WITH(mha.forward(ones({2, 3, 4}), x, x),
                    "MultiHeadAttention: query must be [B, T, 8], got [2, 3, 4]");
  CHECK_THROWS_WITH(mha.forward(x, ones({1, 3, 8}), ones({1, 3, 8})),
                    "MultiHeadAttention: key [1, 3, 8] and value [1, 3, 8] must be [B, S, 8] "
                    "with B = 2");
  CHECK_THROWS_WITH(
      mha.forward(x, x, x, {.key_padding = ones({2, 4}, DType::Bool)}),
      "MultiHeadAttention: key_padding mask bool [2, 4] must be bool [B, S] = [2, 3]");
  CHECK_THROWS_WITH(mha.forward(x, x, x, {.key_padding = ones({2, 3})}),
                    "MultiHeadAttention: key_padding mask float32 [2, 3] must be bool [B, S] = "
                    "[2, 3]");
  CHECK_THROWS_WITH(mha.forward(x, x, x, {.attn = causal_mask(4)}),
                    "MultiHeadAttention: shapes [4, 4] and [2, 2, 3, 3] cannot be broadcast");
  CHECK_THROWS_WITH(
      mha.forward(x, x, x, {.attn = ones({1, 2, 2, 3, 3}, DType::Bool)}),
      "MultiHeadAttention: attn mask [1, 2, 2, 3, 3] does not broadcast to the scores "
      "[B, H, T, S] = [2, 2, 3, 3]");
  CHECK_THROWS_WITH(mha.forward(x, x, x, {.attn = ones({3, 3})}),
                    "MultiHeadAttention: attn mask must be bool, got float32");
}
