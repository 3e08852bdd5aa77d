// Shape ops. reshape/view, transpose, permute, slice, split and chunk return views that share
// the input's storage (no copy); concat and contiguous() copy.
#pragma once

#include <vector>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// A view with a new shape of the same element count; one entry may be -1 (inferred). The
// tensor must be contiguous.
Tensor view(const Tensor& x, const Shape& shape);
// view() when x is contiguous, else a contiguous copy reshaped.
Tensor reshape(const Tensor& x, const Shape& shape);
// Inserts / removes a size-1 dim: a view, whatever x's layout.
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x, int64_t dim);

// Output dim i is input dim dims[i].
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);

// Elements start, start + step, ... before end along dim; negative indices count from the end.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
// Consecutive slices of the given sizes along dim, which must add up to the dim's size.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
// `chunks` slices of ceil(size / chunks) along dim, the last possibly smaller (as PyTorch).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);
// x broadcast to `shape` (NumPy rules), as a packed copy.
Tensor expand(const Tensor& x, const Shape& shape);
// Joins tensors of equal shape but for `dim` along it.
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);

// Writes src, broadcast to dst's shape and converted to its dtype, into dst's elements in place
// (dst a view, such as a slice, or a whole tensor), as x[...] = v does in PyTorch. Not recorded:
// dst must not require grad while grad mode is on. The storage's version is bumped, so a
// backward that saved dst's old values refuses to run.
void assign(const Tensor& dst, const Tensor& src);

}  // namespace tapegrad
