// Reductions over a list of dims (empty = all dims), keeping them as size 1 when keepdim.
#pragma once

#include <vector>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// x summed over the dims along which `shape` was broadcast to x's shape: the gradient of a
// broadcast operand, brought back to the operand's shape (PyTorch's sum_to_size).
Tensor sum_to(const Tensor& x, const Shape& shape);
// The largest value; its gradient goes to the first position that holds it. NaN wins, as in
// PyTorch.
Tensor max(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// The index along `dim` of the first largest value, as int64. Not differentiable.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace tapegrad
