// cross_entropy: hand-computed values, ignore_index, label smoothing (PyTorch's definition),
// gradchecks, errors.
#include <cmath>

#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using tapegrad::testing::random_leaf;
using tapegrad::testing::require_gradcheck;
using tapegrad::testing::require_values;

namespace {
// -log softmax(z)_c for a row z
double nll(std::vector<double> z, int c) {
  double m = z[0];
  for (double v : z) m = std::max(m, v);
  double s = 0;
  for (double v : z) s += std::exp(v - m);
  return m + std::log(s) - z[c];
}
}  // namespace

TEST_CASE("cross_entropy is the mean negative log-likelihood", "[autograd]") {
  const Tensor logits = tensor({1, 2, 3, 0, 0, 5}, {2, 3}, DType::Float64);
  const Tensor y = tensor({2, 0}, {2}, DType::Int64);
  const double expected = (nll({1, 2, 3}, 2) + nll({0, 0, 5}, 0)) / 2;
  require_values(cross_entropy(logits, y), {expected}, 1e-14);
  CHECK(cross_entropy(logits, y).shape() == Shape{});
}

TEST_CASE("ignore_index drops rows from the sum and the count", "[autograd]") {
  const Tensor logits = tensor({1, 2, 3, 0, 0, 5}, {2, 3}, DType::Float64);
  require_values(cross_entropy(logits, tensor({2, -100}, {2}, DType::Int64)), {nll({1, 2, 3}, 2)},
                 1e-14);
  require_values(cross_entropy(logits, tensor({0, 1}, {2}, DType::Int64), {.ignore_index = 0}),
                 {nll({0, 0, 5}, 1)}, 1e-14);
  // all ignored: 0 and a zero gradient
  Tensor l = logits.clone();
  l.set_requires_grad(true);
  Tensor loss = cross_entropy(l, tensor({-100, -100}, {2}, DType::Int64));
  require_values(loss, {0});
  loss.backward();
  require_values(l.grad(), std::vector<double>(6, 0.0));
}

TEST_CASE("label smoothing follows PyTorch's definition", "[autograd]") {
  // loss = (1 - eps) nll(y) + eps / C sum_c nll(c)
  const double eps = 0.1;
  const std::vector<double> z{1, 2, 3};
  const double expected = (1 - eps) * nll(z, 0) + eps / 3 * (nll(z, 0) + nll(z, 1) + nll(z, 2));
  require_values(cross_entropy(tensor({1, 2, 3}, {1, 3}, DType::Float64),
                               tensor({0}, {1}, DType::Int64), {.label_smoothing = eps}),
                 {expected}, 1e-14);
}

TEST_CASE("cross_entropy matches PyTorch with smoothing and ignore_index", "[autograd]") {
  // numbers from scripts/torch_reference.py (python3-torch 1.13)
  Tensor l = tensor({1, 2, 3, 0, 0, 5}, {2, 3}, DType::Float64);
  l.set_requires_grad(true);
  Tensor loss = cross_entropy(l, tensor({2, 0}, {2}, DType::Int64),
                              {.ignore_index = 2, .label_smoothing = 0.2});
  require_values(loss, {4.680052568388115}, 1e-13);
  loss.backward();
  require_values(l.grad(), {0, 0, 0, -0.8600183121878007, -0.06001831218780066, 0.9200366243756013},
                 1e-13);
}

TEST_CASE("cross_entropy backward is softmax minus the target distribution", "[autograd]") {
  Tensor l = tensor({0, 0}, {1, 2}, DType::Float64);
  l.set_requires_grad(true);
  cross_entropy(l, tensor({1}, {1}, DType::Int64)).backward();
  require_values(l.grad(), {0.5, -0.5}, 1e-15);
}

TEST_CASE("cross_entropy gradcheck", "[autograd][gradcheck]") {
  const Tensor logits = random_leaf({5, 4}, 91, -2, 2);
  const Tensor y = tensor({3, -100, 0, 1, 3}, {5}, DType::Int64);
  require_gradcheck([&](auto& in) { return cross_entropy(in[0], y); }, {logits});
  require_gradcheck([&](auto& in) { return cross_entropy(in[0], y, {.label_smoothing = 0.2}); },
                    {logits});
  require_gradcheck(
      [&](auto& in) {
        return cross_entropy(in[0], tensor({3, 1, 0, 1, 3}, {5}, DType::Int64),
                             {.ignore_index = 3, .label_smoothing = 0.1});
      },
      {logits});
}

TEST_CASE("cross_entropy errors", "[autograd][errors]") {
  const Tensor logits = ones({2, 3});
  CHECK_THROWS_WITH(cross_entropy(logits, tensor({0, 3}, {2}, DType::Int64)),
                    "cross_entropy: target 3 at position 1 is outside [0, 3) for logits of shape "
                    "[2, 3]");
  CHECK_THROWS_WITH(cross_entropy(logits, tensor({0, 1, 2}, {3}, DType::Int64)),
                    "cross_entropy: targets of shape [3] do not match logits of shape [2, 3]");
  CHECK_THROWS_WITH(cross_entropy(logits, ones({2})),
                    "cross_entropy: targets must be int64, got float32");
  CHECK_THROWS_WITH(cross_entropy(ones({2, 3, 4}), arange(2)),
                    "cross_entropy: logits must be [N, C], got shape [2, 3, 4]");
  CHECK_THROWS_WITH(cross_entropy(logits, arange(2), {.label_smoothing = 2}),
                    "cross_entropy: label_smoothing must be in [0, 1], got 2");
}
