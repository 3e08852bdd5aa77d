// Elementwise ops with NumPy broadcasting: arithmetic, the activation functions, masking.
// The gradient of a broadcast operand is summed back to its own shape.
#pragma once

#include <cmath>
#include <numbers>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);

// Scalar forms: x + s, x - s, x * s, x / s.
Tensor add(const Tensor& x, double s);
Tensor sub(const Tensor& x, double s);
Tensor mul(const Tensor& x, double s);
Tensor div(const Tensor& x, double s);

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
// The exact GELU, x * Phi(x) with Phi the standard normal CDF (PyTorch's default).
Tensor gelu(const Tensor& x);
// gelu's derivative Phi(x) + x phi(x) as a differentiable tensor: gelu's gradient formula, and
// fused ops' (linear with a GELU epilogue).
Tensor gelu_slope(const Tensor& x);

namespace detail {
// The same for one value, what gelu's and fused ops' kernels compute.
template <class T>
T gelu_of(T v) {
  return v * (1 + std::erf(v * std::numbers::sqrt2_v<T> / 2)) / 2;
}
template <class T>
T gelu_slope_of(T v) {
  const T cdf = (1 + std::erf(v * std::numbers::sqrt2_v<T> / 2)) / 2;
  const T pdf = std::exp(-v * v / 2) * std::numbers::inv_sqrtpi_v<T> / std::numbers::sqrt2_v<T>;
  return cdf + v * pdf;
}
}  // namespace detail

// The error function, 2 / sqrt(pi) * integral of exp(-t^2) from 0 to x (gelu's second
// derivative is written with it).
Tensor erf(const Tensor& x);
// x ** p for a scalar exponent.
Tensor pow(const Tensor& x, double p);
// base ** x for a positive scalar base (the positional encoding's 10000 ** (2i / d)).
Tensor pow(double base, const Tensor& x);
// x with the elements above (tril) or below (triu) the diagonal-th diagonal of its last two
// dims set to 0, as PyTorch's: diagonal 0 is the main one, 1 the one above it.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// out = mask ? value : x, for x of any dtype. `mask` is bool and broadcasts to x's shape. Filling
// attention scores with -inf where the mask is true removes those positions from the softmax.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// out = cond ? a : b, all three broadcast together; cond is bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// Comparisons with a scalar or elementwise (broadcast, one dtype), into bool masks (ids ==
// pad_id). Not differentiable.
Tensor eq(const Tensor& x, double value);
Tensor ne(const Tensor& x, double value);
Tensor lt(const Tensor& x, double value);
Tensor le(const Tensor& x, double value);
Tensor gt(const Tensor& x, double value);
Tensor ge(const Tensor& x, double value);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
// floor(a / b) elementwise (broadcast, one dtype), exact for int64 as Python's //; not
// differentiable (its derivative is 0 almost everywhere).
Tensor floor_divide(const Tensor& a, const Tensor& b);
// a || b for bool masks that broadcast together (a padding mask with a causal one).
Tensor logical_or(const Tensor& a, const Tensor& b);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& x, double s) { return add(x, s); }
inline Tensor operator-(const Tensor& x, double s) { return sub(x, s); }
inline Tensor operator*(const Tensor& x, double s) { return mul(x, s); }
inline Tensor operator/(const Tensor& x, double s) { return div(x, s); }
inline Tensor operator+(double s, const Tensor& x) { return add(x, s); }
inline Tensor operator-(double s, const Tensor& x) { return add(neg(x), s); }
inline Tensor operator*(double s, const Tensor& x) { return mul(x, s); }
inline Tensor operator/(double s, const Tensor& x) { return mul(pow(x, -1.0), s); }

}  // namespace tapegrad
