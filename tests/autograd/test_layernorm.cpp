// layer_norm: closed-form values, gradchecks with and without the affine parameters, errors.
#include <cmath>

#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using tapegrad::testing::random_leaf;
using tapegrad::testing::require_gradcheck;
using tapegrad::testing::require_values;

TEST_CASE("layer_norm normalises each row", "[autograd]") {
  // Row [1, 2, 3]: mean 2, biased variance 2/3.
  const double s = 1 / std::sqrt(2.0 / 3.0 + 1e-5);
  const Tensor x = tensor({1, 2, 3, 5, 5, 5}, {2, 3}, DType::Float64);
  require_values(layer_norm(x, Tensor(), Tensor()), {-s, 0, s, 0, 0, 0}, 1e-12);
  const Tensor w = tensor({1, 2, 3}, DType::Float64), b = tensor({0, 1, 0}, DType::Float64);
  require_values(layer_norm(x, w, b), {-s, 1, 3 * s, 0, 1, 0}, 1e-12);
  // scripts/torch_reference.py (python3-torch 1.13)
  require_values(
      layer_norm(tensor({0.5, -1.0, 2.0, 4.0}, {1, 4}, DType::Float64),
                 tensor({1.0, 0.5, -1.0, 2.0}, DType::Float64),
                 tensor({0.0, 0.1, 0.2, 0.3}, DType::Float64)),
      {-0.4730154737159826, -0.5419495714716908, -0.1378681955114161, 3.1380928422958956}, 1e-13);
  // eps matters for a constant row: 0 / sqrt(0 + eps) = 0, no NaN
  require_values(layer_norm(tensor({5, 5}, {1, 2}), Tensor(), Tensor(), 1e-5), {0, 0});
}

TEST_CASE("layer_norm gradcheck", "[autograd][gradcheck]") {
  const Tensor x = random_leaf({2, 3, 5}, 61);
  const Tensor w = random_leaf({5}, 62, 0.5, 1.5);
  const Tensor b = random_leaf({5}, 63);
  require_gradcheck([](auto& in) { return layer_norm(in[0], in[1], in[2]); }, {x, w, b});
  require_gradcheck([](auto& in) { return layer_norm(in[0], in[1], Tensor()); }, {x, w});
  require_gradcheck([](auto& in) { return layer_norm(in[0], Tensor(), Tensor(), 1e-3); }, {x});
  // only the parameters require grad
  require_gradcheck([&](auto& in) { return layer_norm(x.detach(), in[0], in[1]); }, {w, b});
  // a non-contiguous input
  require_gradcheck([&](auto& in) { return layer_norm(transpose(in[0], 1, 2), Tensor(), in[1]); },
                    {random_leaf({2, 4, 3}, 64), random_leaf({4}, 65)});
}

TEST_CASE("layer_norm errors", "[autograd][errors]") {
  CHECK_THROWS_WITH(layer_norm(ones({2, 4}), ones({3}), Tensor()),
                    "layer_norm: weight has shape [3], expected [4] for input [2, 4]");
  CHECK_THROWS_WITH(layer_norm(ones({2, 4}), Tensor(), ones({4, 1})),
                    "layer_norm: bias has shape [4, 1], expected [4] for input [2, 4]");
  CHECK_THROWS_WITH(layer_norm(ones({2, 4}), ones({4}, DType::Float64), Tensor()),
                    "layer_norm: dtypes differ: input float32 and weight float64");
  CHECK_THROWS_WITH(layer_norm(ones({2}), Tensor(), Tensor(), 0.0),
                    "layer_norm: eps must be positive, got 0");
}
