// Seed notebook 004, "Transformer - Encoder" (a notebook that writes one encoder layer from
// its formulas), with tapegrad: one encoder layer written op by op against the public ops, as the
// notebook writes scaled_dot_product, MultiHeadAttention, LayerNormalization and EncoderLayer,
// printing each step's shape; then checked against nn::EncoderLayer with the same weights. Then the
// notebook's own scaled_dot_product example, whose mask blocks every key.
//
// The library does the same in fewer passes: nn::MultiHeadAttention calls one fused attention
// op (tapegrad/autograd/ops/attention.cpp) for the five attention lines below, layer_norm is one
// kernel (ops/layernorm.cpp) for the notebook's mean, var, std, y, gamma * y + beta.
//
//   ./build/examples/seeds/seed_004_encoder_by_hand
#include <fmt/core.h>

#include <cmath>

#include "examples/cli.h"
#include "tapegrad/nn/nn.h"

using namespace tapegrad;

namespace {

double max_abs_difference(const Tensor& a, const Tensor& b) {
  const Tensor d = sub(a, b);
  return std::sqrt(max(mul(d, d)).item());
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("seed_004_encoder_by_hand", [&] {
    examples::Flags f(argc, argv,
                      "seed_004_encoder_by_hand: notebook 004, an encoder layer op by op\n"
                      "usage: seed_004_encoder_by_hand");
    if (!f.finish()) return 0;
    const NoGradGuard no_grad;  // a forward pass only
    Generator gen(0);
    const int64_t B = 2, T = 10, C = 512, H = 8, D = C / H;
    nn::EncoderLayer layer({.d_model = C, .heads = H, .d_ff = 2048, .dropout = 0.1}, gen);
    layer.eval();  // dropout off: the by-hand version has none to match
    const Tensor x = uniform({B, T, C}, 0, 1, gen);
    const auto& attn = *layer.self_attn;
    auto show = [](const char* what, const Tensor& t) {
      fmt::print("{:<34} {}\n", what, t.shape());
    };

    fmt::print("------- ATTENTION 1 ------\n");
    show("x", x);
    const Tensor q = linear(x, attn.q_proj->weight, attn.q_proj->bias);
    const Tensor k = linear(x, attn.k_proj->weight, attn.k_proj->bias);
    const Tensor v = linear(x, attn.v_proj->weight, attn.v_proj->bias);
    show("q, k, v = x W^T + b", q);
    // [B, T, C] -> [B, H, T, D]: head h is columns h*D .. h*D + D - 1
    auto split = [&](const Tensor& t) { return permute(reshape(t, {B, T, H, D}), {0, 2, 1, 3}); };
    const Tensor qh = split(q), kh = split(k), vh = split(v);
    show("q, k, v per head", qh);
    const Tensor scaled = div(matmul(qh, transpose(kh, -2, -1)), std::sqrt(static_cast<double>(D)));
    show("scaled = q k^T / sqrt(d_k)", scaled);
    const Tensor attention = softmax(scaled, -1);
    show("attention = softmax(scaled)", attention);
    const Tensor values = matmul(attention, vh);
    show("values = attention v", values);
    const Tensor merged = reshape(permute(values, {0, 2, 1, 3}), {B, T, C});
    show("values, heads merged", merged);
    const Tensor attended = linear(merged, attn.out_proj->weight, attn.out_proj->bias);
    show("out = values W_o^T + b_o", attended);
    fmt::print("------- ADD AND LAYER NORMALIZATION 1 ------\n");
    const Tensor x1 = layer_norm(add(x, attended), layer.norm1->weight, layer.norm1->bias);
    show("norm1(x + out)", x1);
    fmt::print("------- FEED FORWARD NETWORK ------\n");
    const auto& ff = *layer.feed_forward;
    const Tensor hidden = relu(linear(x1, ff.linear1->weight, ff.linear1->bias));
    show("relu(x W1^T + b1)", hidden);
    const Tensor ff_out = linear(hidden, ff.linear2->weight, ff.linear2->bias);
    show("hidden W2^T + b2", ff_out);
    fmt::print("------- ADD AND LAYER NORMALIZATION 2 ------\n");
    const Tensor by_hand = layer_norm(add(x1, ff_out), layer.norm2->weight, layer.norm2->bias);
    show("norm2(x1 + ffn)", by_hand);

    const Tensor library = layer.forward(x);
    fmt::print("\nnn::EncoderLayer on the same x: largest difference {}\n",
               max_abs_difference(by_hand, library));

    // The notebook's scaled_dot_product example: its mask adds -1e9 to every score, so every
    // key is equally blocked and each row of weights is uniform (1/10). tapegrad's masks block
    // with -inf, and a row whose every key is blocked gets zero weights instead
    // (multi_head_attention.h).
    fmt::print("\nscaled_dot_product with the notebook's all -1e9 mask:\n");
    const Tensor q2 = uniform({2, 8, 10, 64}, 0, 1, gen), k2 = uniform({2, 8, 10, 64}, 0, 1, gen);
    const Tensor v2 = uniform({2, 8, 10, 64}, 0, 1, gen);
    const Tensor additive = full({2, 1, 1, 10}, -1e9);
    const Tensor weights2 = softmax(add(div(matmul(q2, transpose(k2, -2, -1)), 8.0), additive), -1);
    show("Output Values Shape", matmul(weights2, v2));
    show("Attention Scores Shape", weights2);
    fmt::print("every weight 1/10: largest difference from 0.1 is {:.2g}\n",
               max_abs_difference(weights2, full(weights2.shape(), 0.1)));
    return 0;
  });
}
