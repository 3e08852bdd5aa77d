// Shapes and strides. A Shape is a plain vector of extents; it prints as [2, 3] through
// fmt/ranges. The helpers here are the shape arithmetic every op shares: element counts,
// row-major strides, negative-dim normalisation and NumPy broadcasting.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tapegrad/autograd/error.h"

namespace tapegrad {

using Shape = std::vector<int64_t>;

// Number of elements; 1 for a scalar (empty shape). Throws on a negative dimension or a count
// that overflows int64, so no shape that wraps around can reach an allocation.
int64_t numel(const Shape& shape);

// Row-major strides, in elements: [2, 3, 4] -> [12, 4, 1].
Shape contiguous_strides(const Shape& shape);

// Maps a possibly negative dim into [0, rank); throws naming `op` when out of range.
int64_t normalize_dim(std::string_view op, int64_t dim, int64_t rank);

// NumPy broadcasting: dims are aligned from the right; each pair must be equal or contain a 1.
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);

// Strides that read a tensor of `shape` with `strides` as if it had the larger shape `out`
// (right-aligned, broadcast dims get stride 0). `shape` must broadcast to `out`.
Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& out);

}  // namespace tapegrad
