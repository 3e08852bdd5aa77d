// Fused attention: a hand-computed case, agreement with its unfused twin (values and
// gradients, all three or v's alone, masks and dropout included, on both the small and the
// packed gemm paths), gradchecks, and errors.
#include <algorithm>
#include <cmath>
#include <vector>

#include "helpers.h"
#include "tapegrad/autograd/ops/registry.h"

using namespace tapegrad;
using tapegrad::testing::random_leaf;
using tapegrad::testing::require_gradcheck;
using tapegrad::testing::require_values;

namespace {

// Every element of a within tol of b's.
void require_close(const Tensor& a, const Tensor& b, double tol) {
  REQUIRE(a.shape() == b.shape());
  require_values(a, b.to_vector<double>(), tol);
}

// Random bool mask of `shape`, about a third true.
Tensor random_mask(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  std::vector<double> bits(numel(shape));
  for (double& b : bits) b = gen.uniform() < 1.0 / 3 ? 1 : 0;
  return tensor(bits, shape, DType::Bool);
}

}  // namespace

TEST_CASE("attention of one query over two keys, by hand", "[autograd]") {
  // D = 1, so the scores are q k unscaled: [0, ln 3] -> weights [1/4, 3/4], out = 1 + 6
  const Tensor q = tensor({1}, {1, 1, 1}, DType::Float64);
  const Tensor k = tensor({0, std::log(3.0)}, {1, 2, 1}, DType::Float64);
  const Tensor v = tensor({4, 8}, {1, 2, 1}, DType::Float64);
  Tensor weights;
  require_values(attention(q, k, v, 1, {}, &weights), {7}, 1e-12);
  CHECK(weights.shape() == Shape{1, 1, 1, 2});
  require_values(weights, {0.25, 0.75}, 1e-12);
  // blocking the second key leaves the first with all the weight; blocking both gives zeros
  require_values(attention(q, k, v, 1, {.blocked = tensor({0, 1}, {2}, DType::Bool)}), {4}, 1e-12);
  require_values(attention(q, k, v, 1, {.blocked = tensor({1, 1}, {2}, DType::Bool)}, &weights),
                 {0}, 0);
  require_values(weights, {0, 0}, 0);
}

TEST_CASE("attention matches its unfused twin, masks and dropout included", "[autograd]") {
  struct Case {
    const char* name;
    int64_t B, T, S, C, H;
    Shape mask;  // empty: no mask
    double dropout;
  };
  // [40, 40] x 64-wide heads run on the packed sgemm; one query (T = 1) on dot products, whole
  // vectors and a remainder (D = 20) or whole only (D = 64); heads within a 16 x 16 tile each
  // way on the tile kernels in float32 (up to the edge: T = S = D = 16; the small model's
  // 12 x 12 x 8), on gemm's small kernel in float64 and past the edge (S = 17); q transposed
  // for gemm by a block of 16 columns and one of 8 (D = 24).
  const Case cases[] = {
      {"one query", 2, 1, 9, 40, 2, {2, 1, 1, 9}, 0.0},
      {"one query, 64-wide heads", 3, 1, 70, 128, 2, {}, 0.1},
      {"plain", 2, 5, 7, 12, 3, {}, 0.0},
      {"padding mask", 2, 5, 7, 12, 3, {2, 1, 1, 7}, 0.0},
      {"per-head mask", 2, 5, 7, 12, 3, {2, 3, 5, 7}, 0.0},
      {"query-by-key mask and dropout", 2, 5, 7, 12, 3, {5, 7}, 0.3},
      {"the small model's heads, causal, dropout", 3, 12, 12, 64, 8, {12, 12}, 0.1},
      {"a tile's edge, T = S = D = 16", 2, 16, 16, 48, 3, {2, 1, 1, 16}, 0.2},
      {"past a tile's edge, S = 17", 2, 16, 17, 48, 3, {16, 17}, 0.2},
      {"large heads", 2, 40, 40, 128, 2, {40, 40}, 0.1},
      {"24-wide heads: a whole block of 16 and a half block", 2, 9, 10, 48, 2, {9, 10}, 0.1},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    for (const DType dtype : {DType::Float32, DType::Float64}) {
      const Tensor q = random_leaf({c.B, c.T, c.C}, 1).to(dtype).detach();
      const Tensor k = random_leaf({c.B, c.S, c.C}, 2).to(dtype).detach();
      const Tensor v = random_leaf({c.B, c.S, c.C}, 3).to(dtype).detach();
      std::vector<Tensor> in = {q, k, v};
      for (Tensor& t : in) t.set_requires_grad(true);
      Tensor blocked = c.mask.empty() ? Tensor() : random_mask(c.mask, 4);
      if (c.mask.size() == 2) {  // query 0 sees no key: zero weights, zero gradients
        std::vector<double> bits = blocked.to_vector<double>();
        std::fill_n(bits.begin(), c.S, 1.0);
        blocked = tensor(bits, c.mask, DType::Bool);
      }
      const Tensor dout = random_leaf({c.B, c.T, c.C}, 5).to(dtype).detach();
      auto run = [&](bool fused) {
        Generator gen(9);
        const AttentionOptions options{.blocked = blocked,
                                       .dropout = {.p = c.dropout, .training = true, .gen = &gen}};
        const auto op = [&] { return attention(in[0], in[1], in[2], c.H, options); };
        Tensor out = fused ? op() : (ReferenceModeGuard(), op());
        for (Tensor& t : in) t.zero_grad();
        out.backward(dout);
        return std::vector<Tensor>{out.detach(), in[0].grad(), in[1].grad(), in[2].grad()};
      };
      const std::vector<Tensor> fused = run(true), reference = run(false);
      // float32: sums of up to 64 products in a different order
      const double tol = dtype == DType::Float64 ? 1e-12 : 1e-5;
      for (size_t i = 0; i < fused.size(); ++i) {
        INFO("output, dq, dk, dv: " << i << ", " << fmt::format("{}", dtype));
        require_close(fused[i], reference[i], tol);
      }
      // v's gradient alone: the fused backward then runs no softmax backward, which otherwise
      // makes the dropped weights dv reads
      auto dv_alone = [&](bool fused) {
        Generator gen(9);
        const AttentionOptions options{.blocked = blocked,
                                       .dropout = {.p = c.dropout, .training = true, .gen = &gen}};
        const auto op = [&] { return attention(q.detach(), k.detach(), in[2], c.H, options); };
        Tensor out = fused ? op() : (ReferenceModeGuard(), op());
        in[2].zero_grad();
        out.backward(dout);
        return in[2].grad();
      };
      INFO("dv alone, " << fmt::format("{}", dtype));
      require_close(dv_alone(true), dv_alone(false), tol);
      // without a graph the weights live in each thread's scratch tile: the same output
      const NoGradGuard no_grad;
      Generator gen(9);
      const Tensor scratch = attention(
          in[0], in[1], in[2], c.H,
          {.blocked = blocked, .dropout = {.p = c.dropout, .training = true, .gen = &gen}});
      INFO("no graph, " << fmt::format("{}", dtype));
      require_close(scratch, reference[0], tol);
      // the weights handed out, [B, H, T, S], are the softmax of the scaled scores
      Tensor weights;
      attention(in[0], in[1], in[2], c.H, {.blocked = blocked}, &weights);
      const int64_t D = c.C / c.H;
      auto split = [&](const Tensor& t, int64_t L) {
        return permute(reshape(t, {c.B, L, c.H, D}), {0, 2, 1, 3});
      };
      const Tensor scores =
          mul(matmul(split(q, c.T), transpose(split(k, c.S), -2, -1)), 1 / std::sqrt(D * 1.0));
      INFO("weights");
      require_close(weights,
                    blocked.defined() ? masked_softmax(scores, blocked) : softmax(scores, -1), tol);
    }
  }
}

TEST_CASE("attention over one tensor matches its unfused twin", "[autograd]") {
  // q, k and v one tensor: its gradient buffer takes dq, then dk and dv added to it
  for (const int64_t T : {12, 20}) {  // a 16 x 16 tile's kernels, then gemm's
    for (const DType dtype : {DType::Float32, DType::Float64}) {
      INFO("T = " << T << ", " << fmt::format("{}", dtype));
      Tensor x = random_leaf({2, T, 24}, 11).to(dtype).detach();
      x.set_requires_grad(true);
      const Tensor dout = random_leaf({2, T, 24}, 12).to(dtype).detach();
      auto run = [&](bool fused) {
        Generator gen(3);
        const AttentionOptions options{.dropout = {.p = 0.2, .training = true, .gen = &gen}};
        Tensor out = fused ? attention(x, x, x, 3, options)
                           : (ReferenceModeGuard(), attention(x, x, x, 3, options));
        x.zero_grad();
        out.backward(dout);
        return std::vector<Tensor>{out.detach(), x.grad()};
      };
      const std::vector<Tensor> fused = run(true), reference = run(false);
      const double tol = dtype == DType::Float64 ? 1e-12 : 1e-5;
      require_close(fused[0], reference[0], tol);
      require_close(fused[1], reference[1], tol);
    }
  }
}

TEST_CASE("attention gradcheck", "[autograd][gradcheck]") {
  const Tensor blocked = random_mask({2, 1, 3, 4}, 7);
  require_gradcheck(
      [&](const std::vector<Tensor>& in) {
        return attention(in[0], in[1], in[2], 2, {.blocked = blocked});
      },
      {random_leaf({2, 3, 6}, 1), random_leaf({2, 4, 6}, 2), random_leaf({2, 4, 6}, 3)});
  // dropout: the same mask at every evaluation, from a fresh generator
  require_gradcheck(
      [&](const std::vector<Tensor>& in) {
        Generator gen(5);
        return attention(
            in[0], in[1], in[2], 3,
            {.blocked = blocked, .dropout = {.p = 0.4, .training = true, .gen = &gen}});
      },
      {random_leaf({2, 3, 6}, 4), random_leaf({2, 4, 6}, 5), random_leaf({2, 4, 6}, 6)});
  // self-attention on one tensor, and keys that are the values: one gradient buffer takes
  // the contributions of two or three operands
  require_gradcheck([](const std::vector<Tensor>& in) { return attention(in[0], in[0], in[0], 2); },
                    {random_leaf({2, 4, 6}, 8)});
  require_gradcheck([](const std::vector<Tensor>& in) { return attention(in[0], in[1], in[1], 2); },
                    {random_leaf({1, 3, 4}, 9), random_leaf({1, 5, 4}, 10)});
}

TEST_CASE("attention errors name the op and the shapes", "[autograd][errors]") {
  const Tensor q = zeros({2, 3, 4}), kv = zeros({2, 5, 4});
  CHECK_THROWS_WITH(attention(zeros({3, 4}), kv, kv, 2),
                    "attention: q, k and v must be [B, T, C], [B, S, C] and [B, S, C], got [3, "
                    "4], [2, 5, 4] and [2, 5, 4]");
  CHECK_THROWS_WITH(attention(q, kv, zeros({2, 6, 4}), 2),
                    "attention: k [2, 5, 4] and v [2, 6, 4] must be [B, S, C] with B = 2 and C = "
                    "4 (q is [2, 3, 4])");
  CHECK_THROWS_WITH(attention(q, kv, kv.to(DType::Float64), 2),
                    "attention: dtypes differ: q float32, k float32, v float64");
  CHECK_THROWS_WITH(attention(q, kv, kv, 3), "attention: 3 heads do not divide C = 4");
  CHECK_THROWS_WITH(attention(q, kv, kv, 2, {.dropout = {.p = 1.5}}),
                    "attention: dropout must be in [0, 1], got 1.5 (options.dropout.p)");
  CHECK_THROWS_WITH(attention(q, kv, kv, 2, {.dropout = {.p = 0.1, .training = true}}),
                    "attention: dropout 0.1 in training needs a generator (options.dropout.gen)");
  CHECK_THROWS_WITH(attention(q, kv, kv, 2, {.blocked = zeros({3, 5})}),
                    "attention: blocked mask must be bool, got float32");
  CHECK_THROWS_WITH(attention(q, kv, kv, 2, {.blocked = zeros({3, 4}, DType::Bool)}),
                    "attention: shapes [3, 4] and [2, 2, 3, 5] cannot be broadcast");
  CHECK_THROWS_WITH(attention(q, kv, kv, 2, {.blocked = zeros({4, 1, 1, 1, 5}, DType::Bool)}),
                    "attention: blocked mask [4, 1, 1, 1, 5] does not broadcast to [B, H, T, S] "
                    "= [2, 2, 3, 5]");
}

TEST_CASE("the fast room's attention refuses dropout over a head of 2^32 scores",
          "[autograd][errors]") {
  // the dropout's counters of a head's T x S scores are 32-bit lanes (DropoutRun)
  const FastOps* fast = fast_ops();
  if (fast == nullptr) return;            // the learner's edition
  const Tensor x = zeros({1, 65537, 1});  // 65537^2 scores, checked before any is made
  CHECK_THROWS_WITH(fast->attention(x, x, x, 1, Tensor(), 0.1, 7, nullptr),
                    "attention: dropout on a head of 65537 x 65537 scores, over 2^32 of them, is "
                    "not supported");
}
