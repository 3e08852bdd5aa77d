// Reductions: sum, mean, max, argmax over dims with keepdim.
#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using tapegrad::testing::random_leaf;
using tapegrad::testing::require_gradcheck;
using tapegrad::testing::require_values;

TEST_CASE("sum and mean over dims with and without keepdim", "[autograd]") {
  const Tensor x = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  require_values(sum(x), {21});
  CHECK(sum(x).shape() == Shape{});
  require_values(sum(x, {0}), {5, 7, 9});
  require_values(sum(x, {1}), {6, 15});
  require_values(sum(x, {-1}, true), {6, 15});
  CHECK(sum(x, {-1}, true).shape() == Shape{2, 1});
  require_values(mean(x, {0}), {2.5, 3.5, 4.5});
  require_values(mean(x), {3.5});
  const Tensor y = reshape(arange(0.0, 24.0, 1.0, DType::Float32), {2, 3, 4});
  require_values(sum(y, {0, 2}), {6 + 54, 22 + 70, 38 + 86});  // rows of 4 from both halves
  CHECK(sum(y, {0, 2}, true).shape() == Shape{1, 3, 1});
}

TEST_CASE("max and argmax", "[autograd]") {
  const Tensor x = tensor({1, 5, 3, 9, 2, 9}, {2, 3});
  require_values(max(x), {9});
  require_values(max(x, {1}), {5, 9});
  require_values(max(x, {0}, true), {9, 5, 9});
  require_values(argmax(x, 1), {1, 0});
  require_values(argmax(x, 0), {1, 0, 1});
  CHECK(argmax(x, 1, true).shape() == Shape{2, 1});
  CHECK(argmax(x, 1).dtype() == DType::Int64);
  CHECK(std::isnan(max(tensor({1, NAN, 3}, {3})).item()));  // NaN propagates, as in PyTorch
}

TEST_CASE("max sends the gradient to the first largest element", "[autograd]") {
  Tensor x = tensor({1, 9, 9, 2}, {2, 2}, DType::Float64);
  x.set_requires_grad(true);
  sum(max(x, {1})).backward();
  require_values(x.grad(), {0, 1, 1, 0});
  x.zero_grad();
  max(x).backward();  // tie between [0,1] and [1,0]: the first wins
  require_values(x.grad(), {0, 1, 0, 0});
}

TEST_CASE("reductions gradcheck", "[autograd][gradcheck]") {
  const Tensor x = random_leaf({3, 4, 5}, 31);
  require_gradcheck([](auto& in) { return sum(in[0]); }, {x});
  require_gradcheck([](auto& in) { return sum(in[0], {1}); }, {x});
  require_gradcheck([](auto& in) { return sum(in[0], {0, 2}, true); }, {x});
  require_gradcheck([](auto& in) { return mean(in[0], {-1}); }, {x});
  require_gradcheck([](auto& in) { return mean(in[0], {0, 1}, true); }, {x});
  require_gradcheck([](auto& in) { return max(in[0], {2}); }, {x});  // random: no ties
  require_gradcheck([](auto& in) { return max(in[0], {0, 1}, true); }, {x});
  // on a transposed view
  require_gradcheck([](auto& in) { return sum(transpose(in[0], 0, 2), {0}); }, {x});
}

TEST_CASE("reduction errors", "[autograd][errors]") {
  CHECK_THROWS_WITH(sum(ones({2, 3}), {2}), "sum: dim 2 out of range for a tensor of rank 2");
  CHECK_THROWS_WITH(sum(ones({2, 3}), {1, -1}), "sum: dim -1 given twice in [1, -1]");
  CHECK_THROWS_WITH(max(ones({2, 0}), {1}), "max: cannot reduce over an empty dim of shape [2, 0]");
  CHECK_THROWS_WITH(mean(ones({0})), "mean: cannot average over an empty dim of shape [0]");
  CHECK_THROWS_WITH(argmax(ones({2}), 1), "argmax: dim 1 out of range for a tensor of rank 1");
  CHECK_THROWS_WITH(sum(arange(3)), "sum: expected a float32 or float64 tensor, got int64");
}

TEST_CASE("sum_to sums the broadcast dims back to a shape, and checks it", "[autograd]") {
  const Tensor x = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  require_values(sum_to(x, {3}), {5, 7, 9});
  require_values(sum_to(x, {2, 1}), {6, 15});
  require_values(sum_to(x, {}), {21});
  require_values(sum_to(x, {2, 3}), {1, 2, 3, 4, 5, 6});
  require_gradcheck([](auto& in) { return sum_to(in[0], {1, 3}); }, {random_leaf({2, 3}, 1)});
  CHECK_THROWS_WITH(sum_to(x, {2}), "sum_to: shapes [2] and [2, 3] cannot be broadcast");
  CHECK_THROWS_WITH(sum_to(ones({3}), {2, 3}),
                    "sum_to: shape [2, 3] does not broadcast to the input's shape [3]");
}
