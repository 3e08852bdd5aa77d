// Elementwise ops: values against closed forms, float64 gradchecks (broadcast and masked cases
// included), and error messages.
#include <cmath>
#include <numbers>

#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using tapegrad::testing::random_leaf;
using tapegrad::testing::require_gradcheck;
using tapegrad::testing::require_values;

TEST_CASE("binary arithmetic broadcasts like NumPy", "[autograd]") {
  const Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor row = tensor({10, 20, 30}, {3});
  const Tensor col = tensor({100, 200}, {2, 1});
  require_values(add(a, row), {11, 22, 33, 14, 25, 36});
  require_values(sub(a, col), {-99, -98, -97, -196, -195, -194});
  require_values(mul(col, row), {1000, 2000, 3000, 2000, 4000, 6000});  // [2,1] x [3] -> [2,3]
  require_values(div(a, tensor({2}, Shape{})), {0.5, 1, 1.5, 2, 2.5, 3});
  CHECK(add(col, row).shape() == Shape{2, 3});
}

TEST_CASE("scalar forms and operators", "[autograd]") {
  const Tensor x = tensor({1, 2, 4}, {3});
  require_values(x + 1.0, {2, 3, 5});
  require_values(x - 1.0, {0, 1, 3});
  require_values(2.0 * x, {2, 4, 8});
  require_values(x / 2.0, {0.5, 1, 2});
  require_values(1.0 - x, {0, -1, -3});
  require_values(4.0 / x, {4, 2, 1});
  require_values(-x, {-1, -2, -4});
  require_values(x * x - x / x, {0, 3, 15});
}

TEST_CASE("unary functions match their closed forms", "[autograd]") {
  const std::vector<double> v{-2.0, -0.5, 0.0, 0.5, 3.0};
  const Tensor x = tensor({-2.0, -0.5, 0.0, 0.5, 3.0}, DType::Float64);
  auto expect = [&](const Tensor& y, auto f) {
    std::vector<double> e;
    for (double t : v) e.push_back(f(t));
    require_values(y, e, 1e-12);
  };
  expect(exp(x), [](double t) { return std::exp(t); });
  expect(tanh(x), [](double t) { return std::tanh(t); });
  expect(relu(x), [](double t) { return t > 0 ? t : 0.0; });
  expect(pow(x, 2.0), [](double t) { return t * t; });
  expect(erf(x), [](double t) { return std::erf(t); });
  expect(sin(x), [](double t) { return std::sin(t); });
  expect(cos(x), [](double t) { return std::cos(t); });
  expect(pow(10.0, x), [](double t) { return std::pow(10.0, t); });
  // GELU: gelu(0) = 0; the rest from scripts/torch_reference.py (python3-torch 1.13)
  require_values(gelu(tensor({0.0, 1.0, -1.0, 2.5}, DType::Float64)),
                 {0.0, 0.841344746068543, -0.15865525393145702, 2.4844758366855597}, 1e-14);
  const Tensor p = tensor({0.25, 1.0, 4.0}, DType::Float64);
  require_values(sqrt(p), {0.5, 1.0, 2.0}, 1e-15);
  require_values(log(p), {std::log(0.25), 0.0, std::log(4.0)}, 1e-15);
}

TEST_CASE("binary ops gradcheck with and without broadcasting", "[autograd][gradcheck]") {
  const Tensor a = random_leaf({2, 3, 4}, 1);
  const Tensor b = random_leaf({2, 3, 4}, 2);
  const Tensor row = random_leaf({4}, 3);
  const Tensor col = random_leaf({3, 1}, 4);
  const Tensor pos = random_leaf({3, 1}, 5, 0.5, 2.0);  // away from 0 for div
  for (const auto& [name, op] : std::vector<std::pair<std::string, GradcheckFn>>{
           {"add", [](auto& in) { return add(in[0], in[1]); }},
           {"sub", [](auto& in) { return sub(in[0], in[1]); }},
           {"mul", [](auto& in) { return mul(in[0], in[1]); }},
           {"div", [](auto& in) { return div(in[0], in[1]); }},
       }) {
    INFO("op " << name);
    const bool is_div = name == "div";
    require_gradcheck(op, {a, is_div ? pos : b});  // same shapes, or [2,3,4] / [3,1]
    require_gradcheck(op, {a, is_div ? pos : col});
    if (!is_div) {
      require_gradcheck(op, {a, row});    // [2,3,4] with [4]
      require_gradcheck(op, {col, row});  // [3,1] with [4] -> [3,4]: both broadcast
    }
  }
}

TEST_CASE("a broadcast operand's gradient is summed to its shape", "[autograd]") {
  Tensor bias = tensor({0, 0, 0}, {3}, DType::Float64);
  bias.set_requires_grad(true);
  sum(add(ones({4, 3}, DType::Float64), bias)).backward();
  require_values(bias.grad(), {4, 4, 4});
}

TEST_CASE("unary ops gradcheck", "[autograd][gradcheck]") {
  const Tensor x = random_leaf({3, 5}, 11, -2.0, 2.0);
  const Tensor pos = random_leaf({3, 5}, 12, 0.2, 3.0);
  require_gradcheck([](auto& in) { return neg(in[0]); }, {x});
  require_gradcheck([](auto& in) { return exp(in[0]); }, {x});
  require_gradcheck([](auto& in) { return tanh(in[0]); }, {x});
  require_gradcheck([](auto& in) { return gelu(in[0]); }, {x});
  require_gradcheck([](auto& in) { return erf(in[0]); }, {x});
  require_gradcheck([](auto& in) { return relu(in[0]); }, {x});  // no sample within 1e-6 of 0
  require_gradcheck([](auto& in) { return log(in[0]); }, {pos});
  require_gradcheck([](auto& in) { return sqrt(in[0]); }, {pos});
  require_gradcheck([](auto& in) { return pow(in[0], 3.0); }, {x});
  require_gradcheck([](auto& in) { return pow(in[0], -1.5); }, {pos});
  require_gradcheck([](auto& in) { return pow(10000.0, in[0] / 4.0); }, {x});
  require_gradcheck([](auto& in) { return sin(in[0]); }, {x});
  require_gradcheck([](auto& in) { return cos(in[0]); }, {x});
  require_gradcheck([](auto& in) { return tril(reshape(in[0], {5, 3}), -1) * 2.0; }, {x});
  require_gradcheck([](auto& in) { return triu(in[0], 2) * 2.0; }, {x});
  require_gradcheck([](auto& in) { return 2.0 - in[0] / 3.0 + 1.0; }, {x});
  require_gradcheck([](auto& in) { return 1.0 / in[0]; }, {pos});
}

TEST_CASE("masked_fill and where", "[autograd]") {
  const Tensor x = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor keypad = eq(tensor({0, 0, 1}, {3}), 1);  // mask the last column
  require_values(masked_fill(x, keypad, -INFINITY), {1, 2, -INFINITY, 4, 5, -INFINITY});
  require_values(where(eq(tensor({1, 0}, {2, 1}), 1), x, tensor({0}, Shape{})), {1, 2, 3, 0, 0, 0});
  require_values(ne(arange(3), 1), {1, 0, 1});
}

TEST_CASE("comparisons, floor division and the triangles", "[autograd]") {
  const Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor row = tensor({2, 2, 7}, {3});
  require_values(lt(a, row), {1, 0, 1, 0, 0, 1});
  require_values(le(a, row), {1, 1, 1, 0, 0, 1});
  require_values(gt(a, row), {0, 0, 0, 1, 1, 0});
  require_values(ge(a, row), {0, 1, 0, 1, 1, 0});
  require_values(eq(a, row), {0, 1, 0, 0, 0, 0});
  require_values(ne(a, row), {1, 0, 1, 1, 1, 1});
  require_values(lt(a, 3), {1, 1, 0, 0, 0, 0});
  require_values(ge(a, 3), {0, 0, 1, 1, 1, 1});
  // Python's //: rounds down, for int64 exactly and with either sign
  const Tensor n = tensor({7, -7, 7, -7, 9007199254740993.0}, {5}, DType::Int64);
  const Tensor d = tensor({2, 2, -2, -2, 1}, {5}, DType::Int64);
  CHECK(floor_divide(n, d).to_vector<int64_t>() ==
        std::vector<int64_t>{3, -4, -4, 3, 9007199254740992});
  require_values(floor_divide(tensor({7.5, -7.5}, {2}), tensor({2}, Shape{})), {3, -4});
  const Tensor m = ones({3, 4});
  require_values(tril(m), {1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0});
  require_values(tril(m, 1), {1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1});
  require_values(triu(m), {1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1});
  require_values(triu(m, -1), {1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1});
  // masks and integers fill too: torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
  require_values(triu(ones({2, 2}, DType::Bool), 1), {0, 1, 0, 0});
  CHECK(tril(view(arange(4), {2, 2})).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 2, 3});
}

TEST_CASE("masked_fill and where gradcheck with broadcast masks", "[autograd][gradcheck]") {
  const Tensor x = random_leaf({2, 3, 4}, 21);
  const Tensor y = random_leaf({3, 4}, 22);
  const Tensor mask = eq(tensor({1, 0, 0, 1}, {1, 4}), 1);
  require_gradcheck([&](auto& in) { return masked_fill(in[0], mask, 7.0); }, {x});
  require_gradcheck([&](auto& in) { return where(mask, in[0], in[1]); }, {x, y});
  // masked positions get exactly zero gradient
  Tensor z = zeros({2, 4}, DType::Float64);
  z.set_requires_grad(true);
  sum(masked_fill(z, eq(tensor({1, 0, 0, 1}, {4}), 1), 0.0)).backward();
  require_values(z.grad(), {0, 1, 1, 0, 0, 1, 1, 0});
}

TEST_CASE("elementwise errors name the op and shapes", "[autograd][errors]") {
  CHECK_THROWS_WITH(add(ones({2, 3}), ones({4})), "add: shapes [2, 3] and [4] cannot be broadcast");
  CHECK_THROWS_WITH(mul(ones({2}), ones({2}, DType::Float64)),
                    "mul: dtypes differ: float32 and float64");
  CHECK_THROWS_WITH(exp(arange(3)), "exp: expected a float32 or float64 tensor, got int64");
  CHECK_THROWS_WITH(masked_fill(ones({2}), ones({2}), 0.0),
                    "masked_fill: mask must be bool, got float32");
  CHECK_THROWS_WITH(
      masked_fill(ones({2}), eq(ones({2, 2}), 1), 0.0),
      "masked_fill: mask of shape [2, 2] does not broadcast to the input's shape [2]");
  CHECK_THROWS_WITH(where(eq(ones({3}), 1), ones({2}), ones({2})),
                    "where: shapes [3] and [2] cannot be broadcast");
  CHECK_THROWS_WITH(lt(ones({2}), arange(2)), "lt: dtypes differ: float32 and int64");
  CHECK_THROWS_WITH(floor_divide(arange(2), zeros({2}, DType::Int64)),
                    "floor_divide: integer division by zero");
  CHECK_THROWS_WITH(pow(0.0, ones({2})),
                    "pow: the base of a tensor exponent must be positive, got 0");
  CHECK_THROWS_WITH(tril(ones({3})), "tril: expected at least 2 dims, got shape [3]");
}
