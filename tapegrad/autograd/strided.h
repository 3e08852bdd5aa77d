// The one loop every layout-aware kernel shares: visit all elements of a shape in row-major
// order while keeping a running offset into each of N operands, each with its own strides.
// Broadcasting is a stride of 0, a transposed view is permuted strides, a slice is an offset:
// so a kernel written against for_each_offset handles all of them at once.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "tapegrad/autograd/shape.h"
#include "tapegrad/autograd/threads.h"

namespace tapegrad {

// f(offsets) is called once per element, offsets[k] being the element's offset in operand k.
// Dims of size 1 are dropped and neighbouring dims that every operand steps through as one
// are merged first, so contiguous operands (and a bias broadcast over rows) run as one flat
// loop; the innermost dim is a plain counted loop, which the compiler turns into tight code.
// `base` is added to every offset (a thread's share of a loop starts there).
template <size_t N, class F>
void for_each_offset(const Shape& shape, const std::array<const Shape*, N>& strides, F&& f,
                     std::array<int64_t, N> base = {}) {
  if (numel(shape) == 0) return;
  // Coalesce, walking from the innermost dim outwards.
  Shape sizes;
  std::array<Shape, N> steps;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    bool merge = !sizes.empty();
    for (size_t k = 0; k < N && merge; ++k) {
      merge = (*strides[k])[d] == steps[k].back() * sizes.back();
    }
    if (merge) {
      sizes.back() *= shape[d];
    } else {
      sizes.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) steps[k].push_back((*strides[k])[d]);
    }
  }
  if (sizes.empty()) {  // a single element
    f(base);
    return;
  }
  // sizes[0] is now the innermost dim.
  const size_t rank = sizes.size();
  std::array<int64_t, N> inner_stride{};
  for (size_t k = 0; k < N; ++k) inner_stride[k] = steps[k][0];
  const int64_t inner = sizes[0];
  std::vector<int64_t> index(rank, 0);
  while (true) {
    std::array<int64_t, N> off = base;
    for (int64_t i = 0; i < inner; ++i) {
      f(off);
      for (size_t k = 0; k < N; ++k) off[k] += inner_stride[k];
    }
    // Odometer step over the outer dims.
    size_t d = 1;
    for (; d < rank; ++d) {
      for (size_t k = 0; k < N; ++k) base[k] += steps[k][d];
      if (++index[d] < sizes[d]) break;
      for (size_t k = 0; k < N; ++k) base[k] -= steps[k][d] * sizes[d];
      index[d] = 0;
    }
    if (d == rank) return;
  }
}

// The first dim of size > 1 of shape, where parallel_for_each_offset splits; -1 if none.
inline int64_t split_dim(const Shape& shape) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] > 1) return static_cast<int64_t>(d);
  }
  return -1;
}

// for_each_offset with the outermost dim of size > 1 split between threads, each thread taking
// at least `grain` elements. Only for loops whose distinct indices along that dim write
// distinct elements: the caller checks that the operand it writes does not have stride 0 there.
template <size_t N, class F>
void parallel_for_each_offset(const Shape& shape, const std::array<const Shape*, N>& strides,
                              int64_t grain, F&& f) {
  const int64_t d = split_dim(shape);
  if (numel(shape) == 0 || d < 0) {
    for_each_offset<N>(shape, strides, f);
    return;
  }
  const int64_t per_index = std::max<int64_t>(1, numel(shape) / shape[d]);
  parallel_for(shape[d], grain / per_index + 1, [&](int64_t b, int64_t e) {
    Shape part = shape;
    part[d] = e - b;
    std::array<int64_t, N> base{};
    for (size_t k = 0; k < N; ++k) base[k] = b * (*strides[k])[d];
    for_each_offset<N>(part, strides, f, base);
  });
}

// dst (shape, dst_strides) += src (shape, src_strides), or = when `accumulate` is false.
// Threads split the copy unless dst repeats elements along the split dim (a stride of 0).
template <class T>
void copy_strided(T* dst, const Shape& dst_strides, const T* src, const Shape& src_strides,
                  const Shape& shape, bool accumulate) {
  const int64_t d0 = split_dim(shape);
  const int64_t grain = d0 >= 0 && dst_strides[d0] == 0 ? INT64_MAX : kGrainElements;
  if (accumulate) {
    parallel_for_each_offset<2>(shape, {&dst_strides, &src_strides}, grain,
                                [&](const auto& o) { dst[o[0]] += src[o[1]]; });
  } else {
    parallel_for_each_offset<2>(shape, {&dst_strides, &src_strides}, grain,
                                [&](const auto& o) { dst[o[0]] = src[o[1]]; });
  }
}

}  // namespace tapegrad
