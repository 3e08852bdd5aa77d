// matmul through BLAS and through the small kernel against the naive reference, on odd shapes,
// transposed views and broadcast batches; gradchecks; errors.
#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using tapegrad::testing::random_leaf;
using tapegrad::testing::require_gradcheck;
using tapegrad::testing::require_values;

namespace {
void require_matches_reference(const Tensor& a, const Tensor& b, double tol) {
  INFO("a " << fmt::format("{}", a.shape()) << " b " << fmt::format("{}", b.shape()));
  require_values(matmul(a, b), matmul_reference(a, b).to_vector<double>(), tol);
}
}  // namespace

TEST_CASE("matmul of a 2x2 by hand", "[autograd]") {
  const Tensor a = tensor({1, 2, 3, 4}, {2, 2});
  const Tensor b = tensor({5, 6, 7, 8}, {2, 2});
  require_values(matmul(a, b), {19, 22, 43, 50});
  require_values(matmul(a, transpose(b, 0, 1)), {17, 23, 39, 53});
}

TEST_CASE("matmul agrees with the naive reference on odd shapes", "[autograd]") {
  Generator gen(5);
  auto r = [&](const Shape& s) { return uniform(s, -1, 1, gen); };
  // float32 sums of up to 13 products of values in [-1, 1]: 1e-5 covers the rounding.
  const double tol = 1e-5;
  require_matches_reference(r({1, 1}), r({1, 1}), tol);
  require_matches_reference(r({7, 13}), r({13, 11}), tol);
  require_matches_reference(r({1, 5}), r({5, 1}), tol);
  require_matches_reference(r({3, 7, 13}), r({13, 5}), tol);       // folded into one gemm
  require_matches_reference(r({3, 7, 13}), r({3, 13, 5}), tol);    // batched
  require_matches_reference(r({2, 1, 7, 3}), r({5, 3, 11}), tol);  // batch [2,1] x [5]
  require_matches_reference(r({7, 3}), r({2, 3, 3, 5}), tol);      // 2-D a broadcast over b
  // transposed views go to BLAS as flags
  require_matches_reference(transpose(r({13, 7}), 0, 1), r({13, 5}), tol);
  require_matches_reference(r({2, 7, 3}), transpose(r({2, 5, 3}), 1, 2), tol);
  require_matches_reference(transpose(r({2, 3, 7}), -1, -2), transpose(r({2, 5, 3}), -1, -2), tol);
  // a view BLAS cannot read (permuted batch and rows) is copied first
  require_matches_reference(permute(r({7, 2, 3}), {1, 0, 2}), r({3, 5}), tol);
  // a slice with a row stride larger than its width
  require_matches_reference(slice(r({4, 9}), 1, 2, 5), r({3, 2}), tol);
  // big enough for BLAS (the shapes above take the small kernel), in every layout
  const double big_tol = 2e-5;  // sums of 70 products
  require_matches_reference(r({2, 40, 70}), r({70, 50}), big_tol);
  require_matches_reference(transpose(r({2, 70, 40}), 1, 2), r({2, 70, 50}), big_tol);
  require_matches_reference(r({40, 70}), transpose(r({3, 50, 70}), 1, 2), big_tol);
  // empty inner dim: zeros
  require_values(matmul(zeros({2, 0}), zeros({0, 3})), {0, 0, 0, 0, 0, 0});
  CHECK(matmul(zeros({0, 3}), zeros({3, 2})).shape() == Shape{0, 2});
}

TEST_CASE("float64 matmul is exact to rounding", "[autograd]") {
  Generator gen(6);
  const Tensor a = uniform({3, 17, 19}, -1, 1, gen, DType::Float64);
  const Tensor b = uniform({19, 23}, -1, 1, gen, DType::Float64);
  require_values(matmul(a, b), matmul_reference(a, b).to_vector<double>(), 1e-13);
}

TEST_CASE("matmul gradcheck", "[autograd][gradcheck]") {
  const auto mm = [](auto& in) { return matmul(in[0], in[1]); };
  require_gradcheck(mm, {random_leaf({3, 4}, 1), random_leaf({4, 5}, 2)});
  require_gradcheck(mm, {random_leaf({2, 3, 4}, 3), random_leaf({4, 5}, 4)});        // folded
  require_gradcheck(mm, {random_leaf({2, 3, 4}, 5), random_leaf({2, 4, 5}, 6)});     // batched
  require_gradcheck(mm, {random_leaf({2, 1, 3, 4}, 7), random_leaf({3, 4, 2}, 8)});  // broadcast
  require_gradcheck(mm, {random_leaf({3, 4}, 9), random_leaf({2, 4, 2}, 10)});       // 2-D a
  // attention's q @ k^T with k a transposed view, both operands requiring grad
  require_gradcheck([](auto& in) { return matmul(in[0], transpose(in[1], -2, -1)); },
                    {random_leaf({2, 2, 3, 4}, 11), random_leaf({2, 2, 5, 4}, 12)});
  require_gradcheck([](auto& in) { return matmul(transpose(in[0], 0, 1), in[1]); },
                    {random_leaf({4, 3}, 13), random_leaf({4, 2}, 14)});
}

TEST_CASE("only the operands that require grad get one", "[autograd]") {
  Tensor w = random_leaf({4, 2}, 1);
  const Tensor x = random_leaf({3, 4}, 2).detach();
  sum(matmul(x, w)).backward();
  REQUIRE(w.grad().defined());
  // d sum(x @ w) / dw[k, j] = sum_i x[i, k]
  const Tensor expected = sum(x, {0});
  for (int64_t k = 0; k < 4; ++k) {
    CHECK(w.grad().at({k, 0}) == Approx(expected.at({k})).epsilon(1e-12));
    CHECK(w.grad().at({k, 1}) == Approx(expected.at({k})).epsilon(1e-12));
  }
}

TEST_CASE("matmul errors", "[autograd][errors]") {
  CHECK_THROWS_WITH(matmul(ones({30, 200, 512}), ones({256, 512})),
                    "matmul: inner dimensions differ: [30, 200, 512] and [256, 512]");
  CHECK_THROWS_WITH(matmul(ones({3}), ones({3, 2})),
                    "matmul: operands need rank >= 2, got shapes [3] and [3, 2]");
  CHECK_THROWS_WITH(matmul(ones({2, 3, 4}), ones({3, 4, 5})),
                    "matmul: shapes [2] and [3] cannot be broadcast");
  CHECK_THROWS_WITH(matmul(ones({2, 2}), ones({2, 2}, DType::Float64)),
                    "matmul: dtypes differ: float32 and float64");
  CHECK_THROWS_WITH(matmul(arange(4).to(DType::Int64), ones({2, 2})),
                    "matmul: operands need rank >= 2, got shapes [4] and [2, 2]");
}

TEST_CASE("linear is x @ w^T + b, by hand and against matmul", "[autograd]") {
  // [1, 2] @ [[1, 0], [1, 1], [0, 2]]^T + [10, 20, 30] = [11, 23, 34]
  const Tensor w = tensor({1, 0, 1, 1, 0, 2}, {3, 2});
  require_values(linear(tensor({1, 2}, {2}), w, tensor({10, 20, 30}, {3})), {11, 23, 34});
  require_values(linear(tensor({1, 2}, {1, 2}), w, Tensor()), {1, 3, 4});
  Generator gen(9);
  for (const Shape& xs : {Shape{5, 7}, Shape{2, 3, 7}, Shape{40, 70}}) {
    const Tensor x = uniform(xs, -1, 1, gen);
    Shape ws{xs.back() == 7 ? 6 : 50, xs.back()};
    const Tensor wt = uniform(ws, -1, 1, gen), b = uniform({ws[0]}, -1, 1, gen);
    INFO("x " << fmt::format("{}", xs));
    require_values(linear(x, wt, b), (matmul(x, transpose(wt, 0, 1)) + b).to_vector<double>(),
                   2e-5);
  }
  // an empty inner dim leaves the bias alone
  require_values(linear(zeros({2, 0}), zeros({2, 0}), tensor({1, 2}, {2})), {1, 2, 1, 2});
  require_values(linear(zeros({2, 0}), zeros({2, 0}), Tensor()), {0, 0, 0, 0});
}

TEST_CASE("linear gradcheck with and without a bias", "[autograd][gradcheck]") {
  require_gradcheck([](auto& in) { return linear(in[0], in[1], in[2]); },
                    {random_leaf({2, 3, 4}, 31), random_leaf({5, 4}, 32), random_leaf({5}, 33)});
  require_gradcheck([](auto& in) { return linear(in[0], in[1], Tensor()); },
                    {random_leaf({4}, 34), random_leaf({3, 4}, 35)});
  // one weight and bias in two linears: the second's bias gradient adds to the first's (20
  // columns: whole vectors of them and a remainder)
  require_gradcheck(
      [](auto& in) { return linear(in[0], in[1], in[2]) + linear(in[3], in[1], in[2]); },
      {random_leaf({3, 4}, 39), random_leaf({20, 4}, 40), random_leaf({20}, 41),
       random_leaf({3, 4}, 42)});
  // big enough for BLAS, and (with 2 or more threads) to split the rows and bias columns
  require_gradcheck(
      [](auto& in) { return linear(in[0], in[1], in[2]); },
      {random_leaf({600, 16}, 36), random_leaf({128, 16}, 37), random_leaf({128}, 38)},
      {.max_per_input = 60});
}

// The epilogue against the ops it fuses, from generators in the same state (the same key, so
// the same mask): forward values and every gradient. Shapes for the small kernel, the packed
// one with K over one block (the epilogue must wait for the last), N < OC (shares split w's
// rows, so the tail's column offsets matter) and float64.
TEST_CASE("linear's epilogue is its activation and dropout applied after it", "[autograd]") {
  struct Case {
    Shape x, w;
    DType dtype;
  };
  const std::vector<Case> cases = {{{3, 5}, {4, 5}, DType::Float32},
                                   {{2, 70, 600}, {96, 600}, DType::Float32},
                                   {{8, 64}, {700, 64}, DType::Float32},
                                   {{9, 13}, {11, 13}, DType::Float64}};
  using E = Activation;
  for (const Case& c : cases) {
    for (const auto activation : {E::None, E::ReLU, E::GELU}) {
      for (const double p : {0.0, 0.3, 1.0}) {
        INFO("x " << fmt::format("{}", c.x) << " activation " << static_cast<int>(activation)
                  << " p " << p);
        Generator init(3);
        const Tensor x0 = uniform(c.x, -1, 1, init, c.dtype);
        const Tensor w0 = uniform(c.w, -1, 1, init, c.dtype);
        const Tensor b0 = uniform({c.w[0]}, -1, 1, init, c.dtype);
        const Tensor dy =
            uniform(Shape{c.x[0] * (c.x.size() == 3 ? c.x[1] : 1), c.w[0]}, -1, 1, init, c.dtype);
        auto run = [&](bool fused) {
          Tensor x = x0.clone(), w = w0.clone(), b = b0.clone();
          for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
          Generator gen(11);
          Tensor y;
          if (fused) {
            y = linear(
                x, w, b,
                {.activation = activation, .dropout = {.p = p, .training = true, .gen = &gen}});
          } else {
            y = linear(x, w, b);
            if (activation == E::ReLU) y = relu(y);
            if (activation == E::GELU) y = gelu(y);
            y = dropout(y, p, true, gen);
          }
          sum(mul(reshape(y, dy.shape()), dy)).backward();
          return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad()};
        };
        const auto fused = run(true), unfused = run(false);
        const double tol = c.dtype == DType::Float64 ? 1e-12 : 1e-5;
        for (size_t i = 0; i < fused.size(); ++i) {
          INFO("tensor " << i);
          require_values(fused[i], unfused[i].to_vector<double>(), tol);
        }
      }
    }
  }
  // eval, or no generator outside training: the epilogue has no dropout
  const Tensor x = tensor({-1, 2}, {1, 2}), w = tensor({1, 0, 0, 1}, {2, 2});
  require_values(linear(x, w, Tensor(), {.activation = E::ReLU, .dropout = 0.5}), {0, 2});
}

TEST_CASE("linear with an epilogue gradcheck, and its gradient's gradient",
          "[autograd][gradcheck]") {
  using E = Activation;
  for (const auto activation : {E::None, E::ReLU, E::GELU}) {
    for (const double p : {0.0, 0.4}) {
      INFO("activation " << static_cast<int>(activation) << " p " << p);
      // the same mask at every evaluation, from a fresh generator
      const GradcheckFn f = [=](const std::vector<Tensor>& in) {
        Generator gen(5);
        return linear(
            in[0], in[1], in[2],
            {.activation = activation, .dropout = {.p = p, .training = true, .gen = &gen}});
      };
      const std::vector<Tensor> inputs = {random_leaf({2, 3, 4}, 41), random_leaf({5, 4}, 42),
                                          random_leaf({5}, 43)};
      require_gradcheck(f, inputs);
      const GradcheckResult second = gradgradcheck(f, inputs);
      INFO("gradgradcheck: " << second.message());
      REQUIRE(second.ok);
    }
  }
}

TEST_CASE("linear errors", "[autograd][errors]") {
  CHECK_THROWS_WITH(linear(ones({2, 3}), ones({4, 5}), Tensor()),
                    "linear: weight must be [OC, 3] for input [2, 3], got [4, 5]");
  CHECK_THROWS_WITH(linear(ones({2, 3}), ones({4, 3}), ones({3})),
                    "linear: bias must be [4] for weight [4, 3], got [3]");
  CHECK_THROWS_WITH(linear(ones({2, 3}), ones({4, 3}, DType::Float64), Tensor()),
                    "linear: dtypes differ: input float32, weight float64");
  CHECK_THROWS_WITH(linear(ones({2, 3}), ones({4, 3}), ones({4}, DType::Float64)),
                    "linear: dtypes differ: input float32, weight float32, bias float64");
  CHECK_THROWS_WITH(linear(ones({}), ones({4, 3}), Tensor()),
                    "linear: input must have rank >= 1, got shape []");
  CHECK_THROWS_WITH(linear(ones({2, 3}), ones({4, 3}), Tensor(), {.dropout = {.p = -0.5}}),
                    "linear: dropout must be in [0, 1], got -0.5 (epilogue.dropout.p)");
  CHECK_THROWS_WITH(
      linear(ones({2, 3}), ones({4, 3}), Tensor(), {.dropout = {.p = 0.1, .training = true}}),
      "linear: dropout 0.1 in training needs a generator (epilogue.dropout.gen)");
}
