// Printing: a tensor as text, as PyTorch prints it (tapegrad/viz/print.h).
#include <catch2/catch.hpp>
#include <string>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/viz/print.h"

using namespace tapegrad;

TEST_CASE("tensors print like PyTorch", "[viz]") {
  CHECK(fmt::format("{}", tensor({1, 2, 3, 4}, {2, 2})) ==
        "tensor([[1.0000, 2.0000],\n        [3.0000, 4.0000]])");
  CHECK(fmt::format("{}", tensor({-1, 2}, {2})) == "tensor([-1.0000,  2.0000])");
  CHECK(fmt::format("{}", tensor({3}, Shape{}, DType::Float64)) == "tensor(3.0000, dtype=float64)");
  CHECK(fmt::format("{}", arange(3)) == "tensor([0, 1, 2])");
  CHECK(fmt::format("{}", eq(arange(2), 1)) == "tensor([False,  True])");
  CHECK(fmt::format("{}", tensor({1e-6, 1}, {2})) == "tensor([1.0000e-06, 1.0000e+00])");
  Tensor w = ones({2});
  w.set_requires_grad(true);
  CHECK(fmt::format("{}", w) == "tensor([1.0000, 1.0000], requires_grad=True)");
  CHECK(fmt::format("{}", mul(w, 2.0)) == "tensor([2.0000, 2.0000], grad_fn=<mul>)");
  CHECK(fmt::format("{}", zeros({0})) == "tensor([])");
  // Over 1000 elements: three at each edge of every dim, "..." between.
  CHECK(fmt::format("{}", arange(2000)) == "tensor([   0,    1,    2, ..., 1997, 1998, 1999])");
  const std::string big = fmt::format("{}", zeros({100, 100}, DType::Int64));
  CHECK(big ==
        "tensor([[0, 0, 0, ..., 0, 0, 0],\n        [0, 0, 0, ..., 0, 0, 0],\n        [0, 0, 0, "
        "..., 0, 0, 0],\n        ...,\n        [0, 0, 0, ..., 0, 0, 0],\n        [0, 0, 0, ..., "
        "0, 0, 0],\n        [0, 0, 0, ..., 0, 0, 0]])");
  // A view prints its elements, not its storage's order; three dims part their blocks by a blank
  // line; a summarized view keeps each edge's own values.
  CHECK(fmt::format("{}", transpose(view(arange(6), {2, 3}), 0, 1)) ==
        "tensor([[0, 3],\n        [1, 4],\n        [2, 5]])");
  CHECK(fmt::format("{}", view(arange(8), {2, 2, 2})) ==
        "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])");
  CHECK(fmt::format("{}", transpose(view(arange(2002), {1001, 2}), 0, 1)) ==
        "tensor([[   0,    2,    4, ..., 1996, 1998, 2000],\n"
        "        [   1,    3,    5, ..., 1997, 1999, 2001]])");
}
