// softmax and log_softmax: values, stability, fully masked rows, gradchecks, errors.
#include <algorithm>
#include <cmath>
#include <vector>

#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using tapegrad::testing::random_leaf;
using tapegrad::testing::require_gradcheck;
using tapegrad::testing::require_values;

TEST_CASE("softmax values and stability", "[autograd]") {
  const double e = std::exp(1.0), z = 1 + e + e * e;
  require_values(softmax(tensor({0, 1, 2}, DType::Float64), 0), {1 / z, e / z, e * e / z}, 1e-15);
  require_values(log_softmax(tensor({0, 1, 2}, DType::Float64), 0),
                 {-std::log(z), 1 - std::log(z), 2 - std::log(z)}, 1e-15);
  // large logits do not overflow: softmax is shift invariant
  require_values(softmax(tensor({1000, 1001, 1002}, DType::Float32), 0), {1 / z, e / z, e * e / z},
                 1e-6);
  // along dim 0 of a matrix: each column sums to 1
  const Tensor s = softmax(tensor({1, 2, 3, 4, 5, 6}, {3, 2}), 0);
  require_values(sum(s, {0}), {1, 1}, 1e-6);
}

TEST_CASE("a fully masked row gives zeros and no gradient instead of NaN", "[autograd]") {
  const Tensor mask = eq(tensor({0, 0, 0, 1, 1, 1}, {2, 3}), 1);  // row 1 fully masked
  for (bool log : {false, true}) {
    Tensor x = tensor({1, 2, 3, 4, 5, 6}, {2, 3}, DType::Float64);
    x.set_requires_grad(true);
    const Tensor masked = masked_fill(x, mask, -INFINITY);
    const Tensor y = log ? log_softmax(masked, -1) : softmax(masked, -1);
    for (double v : y.to_vector<double>()) REQUIRE(std::isfinite(v));
    CHECK(y.at({1, 0}) == 0);
    CHECK(y.at({1, 2}) == 0);
    sum(mul(y, y)).backward();
    for (double v : x.grad().to_vector<double>()) REQUIRE(std::isfinite(v));
    CHECK(x.grad().at({1, 1}) == 0);
    CHECK(x.grad().at({0, 0}) != 0);
  }
}

// A NaN or a +inf in a row makes the row NaN, in both rooms: a row of NaN once came out as
// zeros, as if fully masked, and cross_entropy of NaN logits as a loss of 0.
TEST_CASE("a row with NaN or +inf comes out NaN, never as a masked row's zeros", "[autograd]") {
  const double nan = NAN, inf = INFINITY;
  const Tensor blocked = zeros({4, 3}, DType::Bool);
  for (bool reference : {false, true}) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      INFO((reference ? "reference" : "default") << " " << dtype_name(dtype));
      const Tensor x =
          tensor({nan, nan, nan, nan, 1, 2, inf, 1, 2, -inf, nan, -inf}, {4, 3}, dtype);
      const auto all_nan = [](const Tensor& y) {
        for (double v : y.to_vector<double>()) REQUIRE(std::isnan(v));
      };
      const auto check = [&] {
        all_nan(softmax(x, -1));
        all_nan(log_softmax(x, -1));
        all_nan(masked_softmax(x, blocked));
        for (int64_t row = 0; row < 4; ++row) {
          all_nan(cross_entropy(slice(x, 0, row, row + 1), tensor({1}, {1}, DType::Int64)));
        }
      };
      if (reference) {
        const ReferenceModeGuard room;
        check();
      } else {
        check();
      }
    }
  }
}

// The row is -inf in the leaf itself, with no masked_fill after it to zero the gradient, and
// the loss is sum(y) (dout = 1 in the masked row): a backward that forgets the masked row gives
// dout - exp(0) * sum(dout) = -2 per element there.
TEST_CASE("a row that is -inf in the input itself passes no gradient, kernel and formula",
          "[autograd]") {
  for (bool log : {false, true}) {
    for (bool create_graph : {false, true}) {
      INFO((log ? "log_softmax" : "softmax") << (create_graph ? ", formula" : ", kernel"));
      Tensor x = tensor({1, 2, 3, -INFINITY, -INFINITY, -INFINITY}, {2, 3}, DType::Float64);
      x.set_requires_grad(true);
      const Tensor y = log ? log_softmax(x, -1) : softmax(x, -1);
      require_values(slice(y, 0, 1, 2), {0, 0, 0}, 0);
      const Tensor dx = grad({sum(y)}, {x}, {}, {.create_graph = create_graph})[0];
      require_values(slice(dx, 0, 1, 2), {0, 0, 0}, 0);
      // row 0: softmax's gradient of sum(y) is 0; log_softmax's is 1 - 3 p_j
      const Tensor p = softmax(tensor({1, 2, 3}, DType::Float64), 0);
      const Tensor want =
          log ? sub(ones({3}, DType::Float64), mul(p, 3.0)) : zeros({3}, DType::Float64);
      require_values(slice(dx, 0, 0, 1), want.to_vector<double>(), 1e-12);
    }
  }
}

TEST_CASE("softmax gradcheck on every dim and with masks", "[autograd][gradcheck]") {
  const Tensor x = random_leaf({2, 3, 4}, 51, -3, 3);
  for (int64_t dim : {0, 1, 2, -1}) {
    INFO("dim " << dim);
    require_gradcheck([dim](auto& in) { return softmax(in[0], dim); }, {x});
    require_gradcheck([dim](auto& in) { return log_softmax(in[0], dim); }, {x});
  }
  // a causal mask [4, 4] broadcast over a [2, 4, 4] score tensor, plus one fully masked row
  const Tensor scores = random_leaf({2, 4, 4}, 52);
  Tensor m = zeros({4, 4}, DType::Bool);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = i + 1; j < 4; ++j) m.set({i, j}, 1);
  for (int64_t j = 0; j < 4; ++j) m.set({2, j}, 1);
  require_gradcheck([&](auto& in) { return softmax(masked_fill(in[0], m, -INFINITY), -1); },
                    {scores});
  // masked log-probabilities are -inf; zero them so the checked sum stays finite
  require_gradcheck(
      [&](auto& in) {
        return masked_fill(log_softmax(masked_fill(in[0], m, -INFINITY), -1), m, 0.0);
      },
      {scores});
}

TEST_CASE("softmax errors", "[autograd][errors]") {
  CHECK_THROWS_WITH(softmax(ones({2, 3}), 2), "softmax: dim 2 out of range for a tensor of rank 2");
  CHECK_THROWS_WITH(log_softmax(arange(3), 0),
                    "log_softmax: expected a float32 or float64 tensor, got int64");
}

TEST_CASE("masked_softmax equals softmax of the masked_fill, with broadcast masks", "[autograd]") {
  Generator gen(61);
  const Tensor x = uniform({2, 3, 4, 5}, -3, 3, gen);
  std::vector<double> causal(4 * 5), pad(2 * 5);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j) causal[i * 5 + j] = j > i + 1;
  pad[4] = pad[5 + 3] = pad[5 + 4] = 1;
  const Tensor c = tensor(causal, {4, 5}, DType::Bool);
  const Tensor p = reshape(tensor(pad, {2, 5}, DType::Bool), {2, 1, 1, 5});
  for (const Tensor& m : {c, p, logical_or(p, c), zeros({5}, DType::Bool)}) {
    INFO("mask " << fmt::format("{}", m.shape()));
    require_values(masked_softmax(x, m),
                   softmax(masked_fill(x, m, -INFINITY), -1).to_vector<double>(), 1e-6);
  }
  // a fully blocked row gives zeros
  const Tensor all = ones({5}, DType::Bool);
  require_values(masked_softmax(x, all), std::vector<double>(x.numel(), 0.0));
}

TEST_CASE("masked_softmax gradcheck with padding, causal and fully masked rows",
          "[autograd][gradcheck]") {
  Tensor m = zeros({4, 4}, DType::Bool);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = i + 1; j < 4; ++j) m.set({i, j}, 1);
  for (int64_t j = 0; j < 4; ++j) m.set({2, j}, 1);  // row 2 fully masked
  require_gradcheck([&](auto& in) { return masked_softmax(in[0], m); },
                    {random_leaf({2, 4, 4}, 62)});
  const Tensor pad = reshape(tensor({0, 0, 1, 1, 0, 0, 0, 1}, {2, 4}, DType::Bool), {2, 1, 4});
  require_gradcheck([&](auto& in) { return masked_softmax(in[0], pad); },
                    {random_leaf({2, 3, 4}, 63)});
}

TEST_CASE("masked_softmax and logical_or errors", "[autograd][errors]") {
  CHECK_THROWS_WITH(masked_softmax(ones({2, 3}), ones({3})),
                    "masked_softmax: mask must be bool, got float32");
  CHECK_THROWS_WITH(masked_softmax(ones({2, 3}), zeros({2, 2, 3}, DType::Bool)),
                    "masked_softmax: mask of shape [2, 2, 3] does not broadcast to the input's "
                    "shape [2, 3]");
  CHECK_THROWS_WITH(masked_softmax(ones({}), zeros({}, DType::Bool)),
                    "masked_softmax: input must have rank >= 1, got shape []");
  CHECK_THROWS_WITH(logical_or(zeros({2}, DType::Bool), ones({2})),
                    "logical_or: operands must be bool, got bool and float32");
  CHECK_THROWS_WITH(logical_or(zeros({2}, DType::Bool), zeros({3}, DType::Bool)),
                    "logical_or: shapes [2] and [3] cannot be broadcast");
}

TEST_CASE("logical_or broadcasts", "[autograd]") {
  const Tensor a = tensor({0, 1}, {2, 1}, DType::Bool), b = tensor({0, 0, 1}, {3}, DType::Bool);
  require_values(logical_or(a, b), {0, 0, 1, 1, 1, 1});
}
