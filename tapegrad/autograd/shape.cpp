// Shape arithmetic every op shares: element counts (overflow-checked), row-major strides,
// dim normalisation and NumPy broadcasting.
#include "tapegrad/autograd/shape.h"

#include <algorithm>

namespace tapegrad {

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    TG_CHECK(d >= 0, "shape {}: negative dimension {}", shape, d);
    // a product past int64 would wrap to a small count and a buffer too small for the shape
    TG_CHECK(!__builtin_mul_overflow(n, d, &n), "shape {}: element count overflows int64", shape);
  }
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

int64_t normalize_dim(std::string_view op, int64_t dim, int64_t rank) {
  TG_CHECK(dim >= -rank && dim < rank, "{}: dim {} out of range for a tensor of rank {}", op, dim,
           rank);
  return dim < 0 ? dim + rank : dim;
}

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    TG_CHECK(da == db || da == 1 || db == 1, "{}: shapes {} and {} cannot be broadcast", op, a, b);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& out) {
  TG_ASSERT(shape.size() <= out.size() && strides.size() == shape.size());
  Shape result(out.size(), 0);
  const size_t lead = out.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    TG_ASSERT(shape[i] == out[lead + i] || shape[i] == 1);
    result[lead + i] = shape[i] == 1 ? 0 : strides[i];
  }
  return result;
}

}  // namespace tapegrad
