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

// Reductions over the last dims of a contiguous tensor sum runs in lanes and split long runs
// into chunks between threads: against a sum in order, the same bits on one thread and two,
// and the backward spreading each output's gradient over its run.
TEST_CASE("sums over the last dims: long runs, chunks, threads", "[autograd]") {
  Generator gen(5);
  const Tensor x = uniform({3, 7, 40001}, -1, 1, gen, DType::Float32);
  const std::vector<float> v = x.to_vector<float>();
  auto in_order = [&](int64_t begin, int64_t count) {
    double total = 0;
    for (int64_t i = begin; i < begin + count; ++i) total += v[i];
    return total;
  };
  std::vector<double> rows, blocks;
  for (int64_t r = 0; r < 21; ++r) rows.push_back(in_order(r * 40001, 40001));
  for (int64_t b = 0; b < 3; ++b)
    blocks.push_back(in_order(b * 7 * 40001, 7 * 40001) / (7 * 40001));
  const int threads = num_threads();
  std::vector<std::vector<float>> results;
  for (const int t : {1, 2}) {
    set_num_threads(t);
    const Tensor all = sum(x), row = sum(x, {-1}), block = mean(x, {1, 2});
    require_values(all, {in_order(0, 21 * 40001)}, 1e-2);
    require_values(row, rows, 1e-3);
    require_values(block, blocks, 1e-6);
    std::vector<float> got = all.to_vector<float>();
    for (const Tensor& r : {row, block}) {
      const auto more = r.to_vector<float>();
      got.insert(got.end(), more.begin(), more.end());
    }
    results.push_back(got);
  }
  set_num_threads(threads);
  CHECK(results[0] == results[1]);

  // a size-1 dim between reduced ones still leaves a run; a kept dim after a reduced one does not
  const Tensor y = reshape(arange(0.0, 20.0, 1.0, DType::Float64), {4, 1, 5});
  require_values(sum(y, {0, 2}), {190});
  require_values(sum(reshape(y, {4, 5}), {0}), {30, 34, 38, 42, 46});

  Tensor z = uniform({5, 30000}, -1, 1, gen, DType::Float64).set_requires_grad(true);
  sum(mul(mean(z, {1}), tensor({1, 2, 3, 4, 5}, DType::Float64))).backward();
  const std::vector<double> dz = z.grad().to_vector<double>();
  for (int64_t r = 0; r < 5; ++r) {
    INFO("row " << r);
    for (const int64_t j : {0, 12345, 29999}) CHECK(dz[r * 30000 + j] == Approx((r + 1) / 30000.0));
  }
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
