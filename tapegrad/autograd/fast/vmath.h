// exp (and GELU's normal CDF) for the inner loops of kernels (softmax, cross-entropy, linear).
// libm's expf is a call per element that no compiler vectorises; this float version is branch-free
// arithmetic that becomes vector code. Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split
// in two parts so n ln2 is exact), e^r by a degree-6 polynomial, 2^n written into the exponent
// bits. Within 2 ulp of std::exp (tests/autograd/test_softmax.cpp checks it); results below
// FLT_MIN, which would be denormals, are 0; exp(-inf) is 0 and exp(NaN) is NaN.
// float64 keeps std::exp: it serves the gradchecks, where precision is the point. Then the
// sums kernels share: in lanes, and a gradient's column sums by blocks of rows.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tapegrad/autograd/ops/elementwise.h"

namespace tapegrad {

// e^x for x up to 88 (n <= 127, so 2^n is one exponent field and one multiply); past 88.37 it
// is not e^x. Every kernel's exponent is at most 0: a score less its row's maximum, a logit less
// its log-sum-exp, GELU's -x^2 / 2; so nothing handles the top of float's range, which would
// double the instructions of a vector of exps.
inline float exp_poly(float x) {
  constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kLow = -87.3f;         // e^kLow ~ FLT_MIN
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float xc = std::max(x, kLow);
  const float n = (xc * kLog2e + kRound) - kRound;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * (r * r) + r + 1.0f;
  const float y = er * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  const float in_range = x < kLow ? 0.0f : y;
  return x != x ? x : in_range;  // NaN stays NaN
}

template <class T>
T vexp(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return exp_poly(x);
  } else {
    return std::exp(x);
  }
}

// The standard normal CDF Phi(x) = (1 + erf(x / sqrt 2)) / 2 for float, given e = exp(-x^2 / 2),
// branch-free so loops of it vectorise (libm's erff is a call per element): erf by Abramowitz &
// Stegun 7.1.26 (Hastings), |error| <= 1.5e-7. For x < 0 it is the tail (1 - erf(|x| / sqrt 2)) / 2
// itself, without the cancellation of 1 + erf. Within 3e-7 of Phi
// (tests/autograd/test_softmax.cpp), a few float roundings near 1 (6e-8 each). e is the normal
// density's exponential, which GELU's slope needs too: one exp serves both.
inline float normal_cdf_of(float x, float e) {
  const float t = 1.0f / (1.0f + 0.3275911f * 0.70710678118654752f * std::fabs(x));
  const float poly =
      t * (0.254829592f +
           t * (-0.284496739f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  const float tail = 0.5f * poly * e;  // (1 - erf(|x| / sqrt 2)) / 2
  return x < 0 ? tail : 1.0f - tail;
}

inline float normal_cdf_poly(float x) { return normal_cdf_of(x, exp_poly(-0.5f * x * x)); }

// GELU x Phi(x), for the fused linear's float loops; float64 keeps the exact detail::gelu_of
// (std::erf).
template <class T>
T vgelu(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return x * normal_cdf_poly(x);
  } else {
    return detail::gelu_of(x);
  }
}

// GELU at x, with its slope Phi(x) + x phi(x) written to *slope: the forward of a recorded
// linear keeps the slope for its backward, from the same exp and division as the value; float64
// keeps the exact detail::gelu_of and gelu_slope_of.
template <class T>
T vgelu_and_slope(T x, T* slope) {
  if constexpr (std::is_same_v<T, float>) {
    constexpr float kInvSqrt2Pi = 0.398942280401432678f;
    const float e = exp_poly(-0.5f * x * x);
    const float cdf = normal_cdf_of(x, e);
    *slope = cdf + x * kInvSqrt2Pi * e;
    return x * cdf;
  } else {
    *slope = detail::gelu_slope_of(x);
    return detail::gelu_of(x);
  }
}

// Sums and max in 16 independent lanes, combined at the end: a plain running sum is a
// dependency chain the compiler may not reorder (that would change the rounding), while 16
// lanes are 16 chains it turns into vectors, a whole 512-bit one of floats (8 lanes would fill
// half of one). The lanes' sums are combined pairwise (lane k with lane k + 8, then k + 4, ...:
// four vector adds, not a chain of 16 dependent ones, which a short row, a small model's 64
// features, would spend most of its sum waiting on), then the rest past the last whole 16 is
// added. The order is fixed, so the result is reproducible.
// lane_sum_of sums f(j) over j in [0, n); lane_sum and lane_max take a contiguous run.
template <class T, class F>
T lane_sum_of(int64_t n, F f) {
  constexpr int64_t L = 16;
  T acc[L] = {};
  int64_t j = 0;
  for (; j + L <= n; j += L) {
    for (int64_t k = 0; k < L; ++k) acc[k] += f(j + k);
  }
#pragma GCC unroll 4
  for (int64_t w = L / 2; w > 0; w /= 2) {
    for (int64_t k = 0; k < w; ++k) acc[k] += acc[k + w];
  }
  T total = acc[0];
  for (; j < n; ++j) total += f(j);
  return total;
}

template <class T>
T lane_sum(const T* x, int64_t n) {
  return lane_sum_of<T>(n, [x](int64_t j) { return x[j]; });
}

template <class T>
T lane_max(const T* x, int64_t n) {
  constexpr int64_t L = 16;
  T acc[L];
  std::fill(acc, acc + L, -std::numeric_limits<T>::infinity());
  int64_t j = 0;
  for (; j + L <= n; j += L) {
    for (int64_t k = 0; k < L; ++k) acc[k] = acc[k] < x[j + k] ? x[j + k] : acc[k];
  }
  T best = -std::numeric_limits<T>::infinity();
  for (; j < n; ++j) best = best < x[j] ? x[j] : best;
  for (int64_t k = 0; k < L; ++k) best = best < acc[k] ? acc[k] : best;
  return best;
}

// The rows a block of partial column sums takes where a backward sums a gradient's columns as
// it makes the rows (linear's bias, layer norm's weight and bias): each block's sums made while
// its rows are in cache, the blocks then added in order (column_sums), so the bits do not
// depend on how the threads split the blocks.
constexpr int64_t kSumBlockRows = 64;

// dst[c] += sum_n rows[n, c] for the columns c0..c1 of `rows` [N, C], each summed over the rows
// in order. A block of columns at a time down all N rows, its sums in a local array: each row's
// part is a kilobyte the prefetcher streams in, where a single vector of columns would be one
// line a row, a page or more from the last, each load waiting on memory.
template <class T>
void column_sums(T* dst, const T* rows, int64_t N, int64_t C, int64_t c0, int64_t c1) {
  constexpr int64_t kBlock = 1024 / sizeof(T);
  for (int64_t b = c0; b < c1; b += kBlock) {
    const int64_t w = std::min(kBlock, c1 - b);
    T acc[kBlock];
    std::copy(dst + b, dst + b + w, acc);
    for (int64_t n = 0; n < N; ++n) {
      const T* row = rows + n * C + b;
      for (int64_t l = 0; l < w; ++l) acc[l] += row[l];
    }
    std::copy(acc, acc + w, dst + b);
  }
}

}  // namespace tapegrad
