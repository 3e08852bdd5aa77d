// Row kernels of softmax, shared by the softmax ops (softmax.cpp) and fused attention
// (attention.cpp, for a single query's row; its tiles of many queries run down columns): the
// masked forward over blocks of short rows, the plain forward and, next to it, the backward.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "tapegrad/autograd/fast/vmath.h"
#include "tapegrad/autograd/fast_kernel.h"

namespace tapegrad::detail {

// A contiguous tensor viewed as (outer, D, inner): row (o, i) holds the D elements at
// o*D*inner + j*inner + i. inner is 1 for the last dim, the common case, where a row is a
// contiguous run.
struct Rows {
  int64_t outer, D, inner;
};

// Rows of attention scores are short (S = 12 keys in the small model), shorter than a vector
// register, so a row-at-a-time exp runs scalar. The masked kernel therefore works on blocks of
// rows in three passes: shift each row by its max (blocked positions to -inf), exp the whole
// block as one contiguous vector loop (exp(-inf) = 0), then scale each row by 1 / its sum.
constexpr int64_t kBlockElements = 4096;  // a block of rows stays in L1 across the passes

// y (D) = scale * x, blocked positions (bytes of m, 1 = blocked, col apart) -inf. The two mask
// layouts attention and masked_softmax meet, a byte for the whole row (col 0) and a contiguous
// run (col 1), have loops of their own that vectorise, where a scalar select per element would
// not.
template <class T>
void scaled_masked_row(T* y, const T* x, const uint8_t* m, int64_t col, int64_t D, T scale) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  if (col == 0) {
    if (m[0]) {
      std::fill_n(y, D, kNegInf);
    } else {
      for (int64_t j = 0; j < D; ++j) y[j] = x[j] * scale;
    }
  } else if (col == 1) {
    for (int64_t j = 0; j < D; ++j) y[j] = m[j] ? kNegInf : x[j] * scale;
  } else {
    for (int64_t j = 0; j < D; ++j) y[j] = m[j * col] ? kNegInf : x[j] * scale;
  }
}

// inp, out (N, D), mask (N, D) read at mask + row[n] + j * col (bytes, 1 = blocked): softmax of
// each row of scale * inp with its blocked positions as -inf. Rows n0..n1. A fully blocked row
// is all zeros.
template <class T>
void masked_softmax_forward(T* out, const T* inp, const uint8_t* mask, const int64_t* row,
                            int64_t col, int64_t D, T scale, int64_t n0, int64_t n1) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const int64_t block = std::max<int64_t>(1, kBlockElements / std::max<int64_t>(D, 1));
  for (int64_t b0 = n0; b0 < n1; b0 += block) {
    const int64_t b1 = std::min(n1, b0 + block);
    for (int64_t n = b0; n < b1; ++n) {
      T* y = out + n * D;
      scaled_masked_row(y, inp + n * D, mask + row[n], col, D, scale);
      // A row with nothing above -inf is fully blocked: it stays all -inf, and exp zeros it.
      const T maxv = lane_max(y, D);
      if (maxv == kNegInf) continue;
      for (int64_t j = 0; j < D; ++j) y[j] -= maxv;
    }
    T* y = out + b0 * D;
    const int64_t count = (b1 - b0) * D;
    for (int64_t i = 0; i < count; ++i) y[i] = vexp(y[i]);
    for (int64_t n = b0; n < b1; ++n) {
      T* yr = out + n * D;
      const T sum = lane_sum(yr, D);
      if (sum == 0) continue;  // fully blocked row: exp(-inf) left it all zeros
      const T inv = 1 / sum;
      for (int64_t j = 0; j < D; ++j) yr[j] *= inv;
    }
  }
}

// inp, out (outer, D, inner); log selects log_softmax. Runs the outer indices o0..o1.
// kUnit says inner == 1 (a row is a contiguous run), the common case, compiled on its own so
// the exp, sum and max loops become vector code.
template <class T, bool kUnit>
void softmax_forward(T* out, const T* inp, Rows r, bool log, int64_t o0, int64_t o1) {
  const int64_t s = kUnit ? 1 : r.inner;
  for (int64_t o = o0; o < o1; ++o) {
    for (int64_t i = 0; i < r.inner; ++i) {
      const T* x = inp + o * r.D * r.inner + i;
      T* y = out + o * r.D * r.inner + i;
      T maxv = -std::numeric_limits<T>::infinity();
      if constexpr (kUnit) {
        maxv = lane_max(x, r.D);
      } else {
        for (int64_t j = 0; j < r.D; ++j) maxv = std::max(maxv, x[j * s]);
      }
      if (maxv == -std::numeric_limits<T>::infinity()) {  // fully masked, or NaN (max skips it)
        bool nan = false;
        for (int64_t j = 0; j < r.D; ++j) nan = nan || std::isnan(x[j * s]);
        for (int64_t j = 0; j < r.D; ++j) y[j * s] = nan ? std::numeric_limits<T>::quiet_NaN() : 0;
        continue;
      }
      for (int64_t j = 0; j < r.D; ++j) y[j * s] = vexp(x[j * s] - maxv);
      T sum = 0;
      if constexpr (kUnit) {
        sum = lane_sum(y, r.D);
      } else {
        for (int64_t j = 0; j < r.D; ++j) sum += y[j * s];
      }
      if (log) {
        const T lse = maxv + std::log(sum);
        for (int64_t j = 0; j < r.D; ++j) y[j * s] = x[j * s] - lse;
      } else {
        const T inv = 1 / sum;
        for (int64_t j = 0; j < r.D; ++j) y[j * s] *= inv;
      }
    }
  }
}

// softmax:     y = softmax(x)      dx_j += y_j (dy_j - sum_k dy_k y_k)
// log_softmax: y = x - lse(x)      dx_j += dy_j - exp(y_j) sum_k dy_k
// each then times `scale` (attention's 1 / sqrt(D), the derivative of its scaled scores; 1
// elsewhere). A fully masked row was written as zeros by the forward; its gradient is zero. The
// forward leaves no other trace of it, so it is recognised by an all-zero softmax row (a real
// softmax row sums to 1) and, for log_softmax, by an all-zero row (a real one has max 0 and
// others < 0 unless D == 1, where the gradient is zero anyway). store assigns or adds
// (assign_or_add). Rows of the last dim (inner 1) sum in lanes (lane_sum_of), so they vectorise.
template <class T, class Store>
void softmax_backward_rows(Store store, T* dinp, const T* dout, const T* out, Rows r, bool log,
                           int64_t o0, int64_t o1, T scale = 1) {
  for (int64_t o = o0; o < o1; ++o) {
    for (int64_t i = 0; i < r.inner; ++i) {
      const int64_t base = o * r.D * r.inner + i, s = r.inner;
      const T* y = out + base;
      const T* dy = dout + base;
      T* dx = dinp + base;
      bool masked = true;
      for (int64_t j = 0; j < r.D && masked; ++j) masked = y[j * s] == 0;
      if (masked) {
        for (int64_t j = 0; j < r.D; ++j) store(dx[j * s], T{0});
        continue;
      }
      const T dot =
          s == 1 ? lane_sum_of<T>(r.D, [&](int64_t j) { return log ? dy[j] : dy[j] * y[j]; })
                 : lane_sum_of<T>(
                       r.D, [&](int64_t j) { return log ? dy[j * s] : dy[j * s] * y[j * s]; });
      auto grad = [&](int64_t k) {
        return log ? dy[k] - std::exp(y[k]) * dot : y[k] * (dy[k] - dot);
      };
      if (s == 1) {
        for (int64_t j = 0; j < r.D; ++j) store(dx[j], grad(j) * scale);
      } else {
        for (int64_t j = 0; j < r.D; ++j) store(dx[j * s], grad(j * s) * scale);
      }
    }
  }
}

}  // namespace tapegrad::detail
