// The fast room's attention (ops/attention.cpp), tested equal to its reference there. Fused
// attention: one pass per (batch item, head), each its own small problem: two products on
// the head's strided columns, the masked softmax and the dropout in between on a tile of the
// scores, kept transposed ([S, T]: see below). The products run on gemm, or for a head within
// one 16 x 16 block each way (a small model's) on a kernel of their own (tile_kernel).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "tapegrad/autograd/fast/fast_room.h"
#include "tapegrad/autograd/fast/gemm.h"
#include "tapegrad/autograd/fast/gemm_bf16.h"
#include "tapegrad/autograd/fast/softmax_kernels.h"
#include "tapegrad/autograd/fast/transpose16.h"
#include "tapegrad/autograd/fast/vmath.h"
#include "tapegrad/autograd/ops/dropout.h"
#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/matmul.h"
#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/autograd/ops/softmax.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/autograd/threads.h"
#include "tapegrad/profile/profile.h"

namespace tapegrad {

namespace {

// The problem's sizes and where each (b, h) finds its operands. Row strides are all C: a
// head's [T, D] block of q is q + b*T*C + h*D, row i at + i*C. k and v step from one batch item
// to the next by kv_batch, S*C when packed; more when they are the first S rows of a longer
// buffer, as an incremental decoder's cache is (read in place when nothing is recorded).
struct Heads {
  int64_t B, H, T, S, D, C, kv_batch;
  int64_t TP;          // a tile's row length (below): T rounded up to whole vectors
  Shape mask_strides;  // the blocked mask's strides over [B, H, T, S]; empty when none
  int64_t q_at(int64_t n) const { return (n / H) * T * C + (n % H) * D; }
  int64_t kv_at(int64_t n) const { return (n / H) * kv_batch + (n % H) * D; }
  int64_t mask_at(int64_t n) const {
    return mask_strides.empty() ? 0 : (n / H) * mask_strides[0] + (n % H) * mask_strides[1];
  }
  // Items (b, h) worth handing to another thread.
  int64_t grain() const {
    const double flops = std::max(1.0, 4.0 * static_cast<double>(T) * S * D);
    return static_cast<int64_t>(kGrainFlops / flops) + 1;
  }
};

// Item n's tile is kept transposed, [S, TP]: key j's row holds its score with every query, so
// the softmax over a query's keys runs down a column, and each of its steps is one vector op
// across queries. In the [T, S] layout a row is as short as S (12 keys in the small model),
// shorter than a vector, and every step of a row's softmax would run scalar. The rows are
// padded to TP, a whole number of vectors (kTileLanes lanes), so no loop over a row has a scalar
// remainder; the pad lanes hold finite values nothing reads. A single query (T = 1, a decoding
// step) is one row of S instead, and its softmax runs along it. A vector is the target's widest
// register of floats: GCC splits a comparison or a select on a wider vector of its extension
// into one scalar instruction a lane.
#if defined(__AVX512F__)
constexpr int64_t kTileLanes = 16;
#elif defined(__AVX2__)
constexpr int64_t kTileLanes = 8;
#else
constexpr int64_t kTileLanes = 4;
#endif
int64_t tile_row(int64_t T) { return T == 1 ? 1 : (T + kTileLanes - 1) / kTileLanes * kTileLanes; }

// bias (S, TP) = item n's blocked mask as a term of its scores: -inf where query i may not
// attend key j, else 0 (pad lanes too). Read from the mask's bytes one by one, so it is made
// once for the heads that share it (the mask does not depend on the head, as a rule), not once
// a head.
template <class F>
void mask_tile(F* bias, const Heads& x, int64_t n, const uint8_t* blocked) {
  const uint8_t* m = blocked + x.mask_at(n);
  const int64_t row_step = x.mask_strides[2], col_step = x.mask_strides[3];
  std::fill_n(bias, x.S * x.TP, F{0});
  for (int64_t j = 0; j < x.S; ++j) {
    for (int64_t i = 0; i < x.T; ++i) {
      if (m[i * row_step + j * col_step]) bias[j * x.TP + i] = -std::numeric_limits<F>::infinity();
    }
  }
}

// A tile's vectors: kTileLanes columns of a row, loaded and stored whole.
template <class F>
struct Lanes {
  typedef F Vec __attribute__((vector_size(kTileLanes * sizeof(F))));
  // what a comparison of two Vecs gives, and a select (c ? a : b) takes
  using Int = std::conditional_t<sizeof(F) == 4, int32_t, int64_t>;
  typedef Int Mask __attribute__((vector_size(kTileLanes * sizeof(F))));
  static Vec load(const F* p) {
    Vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(F* p, Vec v) { std::memcpy(p, &v, sizeof v); }
};

// Dropout on item n's tile (T > 1), the mask of element (n, i, j) by its flat index in
// [B, H, T, S] as dropout_factors reads it: the factors of a row's strip of kTileLanes lanes,
// made as the softmax writes the weights, their kept flags kept as the bits of one word a
// strip's row ([S, TP / kTileLanes] words an item), from which backward makes them again
// (factors_of) instead of hashing the mask a second time. In vectors of GCC's extension: GCC
// unrolls a loop over the lanes and hashes them one by one.
typedef uint32_t Counters __attribute__((vector_size(kTileLanes * sizeof(uint32_t))));
typedef int32_t Flags __attribute__((vector_size(kTileLanes * sizeof(int32_t))));
template <int... l>
constexpr Counters lane_numbers(std::integer_sequence<int, l...>) {
  return Counters{l...};
}
template <int... l>
constexpr Flags lane_bits(std::integer_sequence<int, l...>) {
  return Flags{(1 << l)...};
}
constexpr Counters kLane = lane_numbers(std::make_integer_sequence<int, kTileLanes>{});
constexpr Flags kLaneBit = lane_bits(std::make_integer_sequence<int, kTileLanes>{});

template <class F>
struct TileDropout {
  DropoutRun run;  // from item n's first element, n T S (T S <= 2^32)
  F scale;         // dropout_scale
  // The factors of a row's lanes from their kept flags, the flags into *word (bit l: lane l)
  typename Lanes<F>::Vec factors(Flags kept, uint16_t* word) const {
#if defined(__AVX512F__)
    const auto flags = reinterpret_cast<__m512i>(kept);  // one compare into a mask register
    *word = static_cast<uint16_t>(_mm512_test_epi32_mask(flags, flags));
#elif defined(__AVX2__)
    *word = static_cast<uint16_t>(_mm256_movemask_ps(reinterpret_cast<__m256>(kept)));
#else
    *word = static_cast<uint16_t>(_mm_movemask_ps(reinterpret_cast<__m128>(kept)));
#endif
    using V = Lanes<F>;
    return __builtin_convertvector(kept, typename V::Mask) ? typename V::Vec{} + scale
                                                           : typename V::Vec{};
  }
};

// Where the word of kept flags for row j's lanes [c, c + kTileLanes) of a tile TP wide is.
inline int64_t flag_word(int64_t j, int64_t c, int64_t TP) {
  return j * (TP / kTileLanes) + c / kTileLanes;
}

// The factors a word of kept flags stands for: scale at its set bits, else 0.
template <class F>
typename Lanes<F>::Vec factors_of(uint16_t word, F scale) {
  using V = Lanes<F>;
  const Flags on = ((Flags{} + word) & kLaneBit) != 0;
  return __builtin_convertvector(on, typename V::Mask) ? typename V::Vec{} + scale
                                                       : typename V::Vec{};
}

// p (S, TP) = the attention weights of item n from its scores, in place: scale, add the
// mask's bias (null: none), softmax down each column. A query with every key blocked gets zero
// weights. The columns go kTileLanes at a time, in vectors of GCC's vector extension (GCC
// leaves plain loops over a vector's lanes scalar where a bias is in them), so each one's
// running max and sum stay in a register from row to row, and the strip (S rows) stays in L1
// through its three passes: scale, mask and max; exp and sum; normalise. With a dropout (null:
// none), the last pass writes the dropped weights too (dropped, S x TP) and the kept flags
// (keep, S x TP / kTileLanes words).
template <class F>
void softmax_columns(F* p, const Heads& x, const F* bias, F scale, const TileDropout<F>* drop,
                     F* dropped, uint16_t* keep) {
  using V = Lanes<F>;
  using Vec = typename V::Vec;
  constexpr F kNegInf = -std::numeric_limits<F>::infinity();
  const int64_t S = x.S, TP = x.TP;
  for (int64_t c = 0; c < TP; c += kTileLanes) {
    Vec top = Vec{} + kNegInf;
    for (int64_t j = 0; j < S; ++j) {
      F* row = p + j * TP + c;
      Vec v = V::load(row) * scale;
      if (bias) v += V::load(bias + j * TP + c);
      V::store(row, v);
      top = v > top ? v : top;
    }
    top = top == kNegInf ? Vec{} : top;  // a fully blocked column: exp(-inf - 0) zeros it
    F shift[kTileLanes];
    V::store(shift, top);
    Vec sum{};
    for (int64_t j = 0; j < S; ++j) {
      F* row = p + j * TP + c;
      for (int64_t l = 0; l < kTileLanes; ++l) row[l] = vexp(row[l] - shift[l]);
      sum += V::load(row);
    }
    const Vec inv = sum == 0 ? Vec{} : 1 / sum;
    // the strip's lanes' elements past the item's first in row 0: (c + l) S; row j's are j further
    const Counters strip = static_cast<uint32_t>(c * S) + kLane * static_cast<uint32_t>(S);
    for (int64_t j = 0; j < S; ++j) {
      const int64_t at = j * TP + c;
      const Vec w = V::load(p + at) * inv;
      V::store(p + at, w);
      if (drop) {
        uint16_t* word = keep + flag_word(j, c, TP);
        const Flags kept = drop->run.kept(strip + static_cast<uint32_t>(j));
        V::store(dropped + at, w * drop->factors(kept, word));
      }
    }
  }
}

// Columns [c, c + G kTileLanes) of softmax_columns_backward: G column sums down the rows at
// once, so an add does not wait on the one before it (one sum at a time would wait an add's
// latency every row).
template <int64_t G, class F>
void softmax_columns_backward_strip(F* ds, const F* p, int64_t S, int64_t TP, F scale, int64_t c,
                                    const uint16_t* keep, F drop_scale, F* dropped) {
  using V = Lanes<F>;
  typename V::Vec dot[G] = {};
  for (int64_t j = 0; j < S; ++j) {
    for (int64_t g = 0; g < G; ++g) {
      const int64_t at = j * TP + c + g * kTileLanes;
      typename V::Vec d = V::load(ds + at);
      const typename V::Vec w = V::load(p + at);
      if (keep) {  // through the dropout: dp = dp' * factor; the dropped weights for dv
        const auto f = factors_of(keep[flag_word(j, c, TP) + g], drop_scale);
        d *= f;
        V::store(ds + at, d);
        if (dropped) V::store(dropped + at, w * f);
      }
      dot[g] += d * w;
    }
  }
  for (int64_t j = 0; j < S; ++j) {
    for (int64_t g = 0; g < G; ++g) {
      const int64_t at = j * TP + c + g * kTileLanes;
      V::store(ds + at, scale * V::load(p + at) * (V::load(ds + at) - dot[g]));
    }
  }
}

// ds (S, TP) = the gradient of item n's scores from the weights' gradient dp (S, TP), in
// place, with p (S, TP) the weights: scale * p * (dp - the column's sum of dp * p), each
// column's sum down its rows in order. A fully blocked column has p all zero, so its gradient
// is zero. With the dropout's kept flags (keep; null: none) ds holds dp' = dout v^T, taken
// through the dropout first, and the dropped weights go to `dropped` (null: not wanted).
template <class F>
void softmax_columns_backward(F* ds, const F* p, int64_t S, int64_t TP, F scale,
                              const uint16_t* keep, F drop_scale, F* dropped) {
  constexpr int64_t G = 4;
  int64_t c = 0;
  for (; c + G * kTileLanes <= TP; c += G * kTileLanes) {
    softmax_columns_backward_strip<G>(ds, p, S, TP, scale, c, keep, drop_scale, dropped);
  }
  for (; c < TP; c += kTileLanes) {
    softmax_columns_backward_strip<1>(ds, p, S, TP, scale, c, keep, drop_scale, dropped);
  }
}

// dropped (S, TP) = p times the factors of the kept flags `keep`: the dropped weights where the
// softmax's backward does not make them.
template <class F>
void kept_weights(F* dropped, const F* p, const uint16_t* keep, int64_t S, int64_t TP,
                  F drop_scale) {
  using V = Lanes<F>;
  for (int64_t j = 0; j < S; ++j) {
    for (int64_t c = 0; c < TP; c += kTileLanes) {
      const int64_t at = j * TP + c;
      V::store(dropped + at, V::load(p + at) * factors_of(keep[flag_word(j, c, TP)], drop_scale));
    }
  }
}

// factor (S, TP) = what dropout multiplies item n's weights by, for a single query (T = 1; a
// larger tile's come from TileDropout): dropout_scale where the mask keeps, else 0; with p, the
// weights p (S, TP) times them instead (the forward's one use of them, so no tile of factors is
// written and read back). The mask element of (n, i, j) is its
// flat index in [B, H, T, S], as the dropout op's would be, so a row of the tile reads counters
// S apart; the pad lanes' counters run past the item's, and multiply pad lanes.
template <class F>
void dropout_factors(F* factor, const Heads& x, int64_t n, const DropoutMask& mask, double dropout,
                     const F* p = nullptr) {
  const auto scale = static_cast<F>(dropout_scale(dropout));
  const int64_t S = x.S, TP = x.TP;
  const auto first = static_cast<uint64_t>(n * x.T * S);
  for (int64_t j = 0; j < S; ++j) {
    for (int64_t i = 0; i < TP; ++i) {
      const int64_t at = j * TP + i;
      const F f = mask.keeps(first + static_cast<uint64_t>(i * S + j)) ? scale : F{0};
      factor[at] = p ? p[at] * f : f;
    }
  }
}

// Note [attention under autocast]: a product under an AutocastGuard reads bfloat16 operands
// and sums exact products in float32. A head large enough for gemm's packed kernels has its
// products run by gemm in Precision::BFloat16 (bf16_gemm, gemm_bf16.h), which rounds the
// operands as it packs them: q, k, v, dout, the weights and the gradient of the scores are read
// where they are, and nothing the size of the inputs is written. Its scores' product reads q by
// rows (op(B) = q^T) instead of through transpose_head's copy, so the tile's pad columns are
// zeroed after it. A tiny head's products go to the tile kernel or gemm's small kernel, which
// would round a copy of each operand for each product; so a tiny head's operands are rounded
// here, once, as they are copied into the thread's buffers (and the weights as product_weights
// copies them, the gradient of the scores in place), and its products run in float32: the same
// exact products in another order than bf16_gemm's, which only a product split between threads
// would have to match, and a head is never split.

// x as a product reads it: rounded to bfloat16 when bf16 (F float).
template <class F>
F operand(F x, bool bf16) {
  if constexpr (std::is_same_v<F, float>) return bf16 ? round_to_bf16(x) : x;
  return x;
}

// x[0, n) rounded to bfloat16 in place when bf16 (F float).
template <class F>
void round_in_place(F* x, int64_t n, bool bf16) {
  if constexpr (std::is_same_v<F, float>) {
    if (bf16) round_to_bf16(x, n, x);
  }
}

// A head's block of rows, D wide and `ld` apart, as a product reads it.
template <class F>
struct Block {
  const F* data;
  int64_t ld;
};

// C (M x N, ldc) = beta C + op(A) (M x K) B (K x N, B.ld), op(A) = A^T with ta: an item's
// product, handed down the tile kernel's calls by reference. Its ten values do not fit the
// argument registers, and copied onto the stack at each call, B's two words would be read back
// by one wider load that waits on the two stores.
template <class F>
struct Product {
  bool ta;
  int64_t M, N, K;
  const F* A;
  int64_t lda;
  Block<F> B;
  F beta;
  F* C;
  int64_t ldc;
};

// The `rows` x D block at `in` (rows ld apart) as a product reads it: in place, or rounded to
// bfloat16 into buf (rows x D, packed) when bf16.
template <class F>
Block<F> head_block(const F* in, int64_t rows, int64_t ld, int64_t D, bool bf16, F* buf) {
  if (!bf16) return {in, ld};
  for (int64_t r = 0; r < rows; ++r) {
    int64_t d = 0;
    if constexpr (std::is_same_v<F, float>) {  // whole and half vectors rounded in registers
      using V = Lanes<F>;
      for (; d + kTileLanes <= D; d += kTileLanes) {
        V::store(buf + r * D + d, rounded_lanes(V::load(in + r * ld + d)));
      }
      typedef F Half __attribute__((vector_size(kTileLanes / 2 * sizeof(F))));
      if (d + kTileLanes / 2 <= D) {
        Half h;
        std::memcpy(&h, in + r * ld + d, sizeof h);
        h = rounded_lanes(h);
        std::memcpy(buf + r * D + d, &h, sizeof h);
        d += kTileLanes / 2;
      }
    }
    for (; d < D; ++d) buf[r * D + d] = operand(in[r * ld + d], bf16);
  }
  return {buf, D};
}

// out (D, TP) = the transpose of a head's block in (T, D) (rows C apart), rounded when bf16:
// the right operand of the tile's products with a head's rows, whole vectors of queries wide.
// Its pad columns hold zeros (the caller's buffer starts as zeros; a register block writes
// them as zeros), so products with it give zero pad lanes. kTileLanes queries at a time, so the
// rows written stay few while their lines fill; in floats, square blocks of kTileLanes through a
// transpose in registers, each row of a block loaded whole where its floats lie within the
// `room` elements readable from `in`: a block's rows past T are zeros (they fill pad lanes), and
// its columns past D (the next head's) become rows of the transpose that are not stored. A small
// model's head (T = 12, D = 8) is one block of 16 lanes.
template <class F>
void transpose_head(F* out, const F* in, int64_t room, const Heads& x, bool bf16) {
  using V = Lanes<F>;
  for (int64_t i0 = 0; i0 < x.T; i0 += kTileLanes) {
    const int64_t i1 = std::min(x.T, i0 + kTileLanes);
    int64_t d0 = 0;
    if constexpr (std::is_same_v<F, float>) {
      for (; x.TP % kTileLanes == 0 && x.D - d0 > kTileLanes / 2 &&
             (i1 - 1) * x.C + d0 + kTileLanes <= room;
           d0 += kTileLanes) {
        typename V::Vec rows[kTileLanes];
        for (int64_t r = 0; r < kTileLanes; ++r) {
          rows[r] = i0 + r < i1 ? V::load(in + (i0 + r) * x.C + d0) : typename V::Vec{};
        }
        detail::transpose(rows);
        for (int64_t d = 0; d < std::min(kTileLanes, x.D - d0); ++d) {
          F* row = out + (d0 + d) * x.TP + i0;
          V::store(row, bf16 ? rounded_lanes(rows[d]) : rows[d]);
        }
      }
      // 8 columns or fewer left of 16 lanes: rows i and i + 8 a vector, 8 floats each, three
      // stages
      if constexpr (kTileLanes == 16) {
        if (x.TP % kTileLanes == 0 && d0 < x.D && x.D - d0 <= 8 &&
            (i1 - 1) * x.C + d0 + 8 <= room) {
          typedef F Half __attribute__((vector_size(8 * sizeof(F))));
          const auto half = [&](int64_t i) {
            Half h{};
            if (i < i1) std::memcpy(&h, in + i * x.C + d0, sizeof h);
            return h;
          };
          typename V::Vec rows[8];
          for (int64_t r = 0; r < 8; ++r) {
            rows[r] = __builtin_shufflevector(half(i0 + r), half(i0 + r + 8), 0, 1, 2, 3, 4, 5, 6,
                                              7, 8, 9, 10, 11, 12, 13, 14, 15);
          }
          detail::transpose_last_stages(rows);
          for (int64_t d = 0; d < x.D - d0; ++d) {
            F* row = out + (d0 + d) * x.TP + i0;
            V::store(row, bf16 ? rounded_lanes(rows[d]) : rows[d]);
          }
          d0 = x.D;
        }
      }
    }
    for (int64_t d = d0; d < x.D; ++d) {
      for (int64_t i = i0; i < i1; ++i) out[d * x.TP + i] = operand(in[i * x.C + d], bf16);
    }
  }
}

// The pad columns [T, TP) of an (S, TP) tile set to zero, so the softmax's pad lanes compute
// on zeros, not on whatever the buffer held.
template <class F>
void zero_pad(F* tile, int64_t S, int64_t T, int64_t TP) {
  for (int64_t j = 0; j < S && T < TP; ++j) std::fill(tile + j * TP + T, tile + (j + 1) * TP, F{0});
}

// A row of tile_kernel's C in registers: 16 lanes, or 8 for a row no wider (a head's D of 8).
// AVX-512 cores with 256-bit multiply-add units (Zen 4) run two 8-lane multiply-adds a cycle
// and one of 16, so a product 8 wide takes half the time on the narrow vectors; elsewhere no
// longer. Loads and stores read and write the first n lanes only. kRows: the most rows a pass
// sums at once, their accumulators and B's vector within the registers; kStep: the rows a pass
// is rounded up to, a divisor of 8, so that a pass over a transposed tile's rows stays within
// its TP (a multiple of 8).
#if defined(__AVX512F__)
struct Lanes16 {
  using Vec = __m512;
  static constexpr int64_t kRows = 16, kStep = 4;
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec fma(float a, Vec b, Vec c) { return _mm512_fmadd_ps(_mm512_set1_ps(a), b, c); }
  static __mmask16 first(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }
  static Vec load(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(float* p, __mmask16 m, Vec v) { _mm512_mask_storeu_ps(p, m, v); }
};
struct Lanes8 {
  using Vec = __m256;
  static constexpr int64_t kRows = 16, kStep = 4;
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec fma(float a, Vec b, Vec c) { return _mm256_fmadd_ps(_mm256_set1_ps(a), b, c); }
  static __mmask8 first(int64_t n) { return static_cast<__mmask8>((1u << n) - 1); }
  static Vec load(__mmask8 m, const float* p) { return _mm256_maskz_loadu_ps(m, p); }
  static void store(float* p, __mmask8 m, Vec v) { _mm256_mask_storeu_ps(p, m, v); }
};
constexpr bool kLanesInRegisters = true;
#elif defined(__AVX2__) && defined(__FMA__)
// AVX2's 16 registers: 12 rows of one vector, or 6 of two (a row of 16 lanes as two halves).
// A vector whose lanes are all wanted is loaded and stored plainly: AMD's masked store takes
// many times a store's cycles.
struct Lanes8 {
  using Vec = __m256;
  struct Mask {
    __m256i lanes;
    bool all;
  };
  static constexpr int64_t kRows = 12, kStep = 4;
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec fma(float a, Vec b, Vec c) { return _mm256_fmadd_ps(_mm256_set1_ps(a), b, c); }
  static Mask first(int64_t n) {
    return {_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                               _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
            n >= 8};
  }
  static Vec load(Mask m, const float* p) {
    return m.all ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m.lanes);
  }
  static void store(float* p, Mask m, Vec v) {
    if (m.all) {
      _mm256_storeu_ps(p, v);
    } else {
      _mm256_maskstore_ps(p, m.lanes, v);
    }
  }
};
struct Lanes16 {
  struct Vec {
    __m256 lo, hi;
  };
  struct Mask {
    Lanes8::Mask lo, hi;
  };
  static constexpr int64_t kRows = 6, kStep = 2;
  static Vec zero() { return {Lanes8::zero(), Lanes8::zero()}; }
  static Vec fma(float a, Vec b, Vec c) {
    const __m256 x = _mm256_set1_ps(a);
    return {_mm256_fmadd_ps(x, b.lo, c.lo), _mm256_fmadd_ps(x, b.hi, c.hi)};
  }
  static Mask first(int64_t n) { return {Lanes8::first(n), Lanes8::first(n - 8)}; }
  static Vec load(Mask m, const float* p) {
    return {Lanes8::load(m.lo, p), Lanes8::load(m.hi, p + 8)};
  }
  static void store(float* p, Mask m, Vec v) {
    Lanes8::store(p, m.lo, v.lo);
    Lanes8::store(p + 8, m.hi, v.hi);
  }
};
constexpr bool kLanesInRegisters = true;
#else  // tile_rows runs only where a row of 16 floats is registers (kRegisterTiles)
struct Lanes16;
struct Lanes8;
constexpr bool kLanesInRegisters = false;
#endif

// Whether F's tile rows are registers, as tile_kernel's masked loads and stores need (the lanes
// above).
template <class F>
constexpr bool kRegisterTiles = (kLanesInRegisters && std::is_same_v<F, float>);

// The largest head the tile kernels take, each way.
constexpr int64_t kTileMost = 16;

// Whether each item's products run on the tile kernels below: a head within one 16 x 16 block
// each way (T, S and D at most kTileMost, T > 1: a small model's 12 x 12 x 8) in float32. Its
// products are too small to pay for the setup of gemm's small kernel (a padded copy of B,
// accumulators through memory, the product's shape found again each call), which would take
// more time than their multiply-adds. Under autocast a tiny head's operands come rounded
// (head_block).
template <class F>
bool tile_head(const Heads& x, Precision precision) {
  return kRegisterTiles<F> && x.T > 1 && x.TP <= kTileMost && x.S <= kTileMost &&
         x.D <= kTileMost && precision == Precision::Float32;
}

// Rows [r0, r0 + R) of tile_kernel's C (those below M): R chains of multiply-adds at once, each
// row's vector of N lanes (L) loaded and stored masked. With ta, op(A)'s rows are A's columns,
// read from one pointer a step of k; a column past M (to r0 + R <= lda) is read but not stored.
// Else A's rows are read where they lie: with kFit, all R of them below M, by a pointer every
// third row, row g at a[g / 3] + (g % 3) lda (twelve rows from four pointers and two offsets);
// otherwise by a pointer a row, a row past M reading row M - 1 (twelve pointers take more
// registers than there are, and the loop reloads them).
template <int64_t R, bool TA, bool kFit, class L>
void tile_rows(int64_t r0, const Product<float>& p) {
  if constexpr (kRegisterTiles<float>) {
    const int64_t M = p.M, K = p.K, lda = p.lda, ldc = p.ldc;
    const float *A = p.A, *b_data = p.B.data;
    const int64_t ldb = p.B.ld;
    const auto lanes = L::first(p.N);
    const float* a[TA ? 1 : kFit ? (R + 2) / 3 : R];
    if constexpr (TA) {
      a[0] = A + r0;
    } else if constexpr (kFit) {
#pragma GCC unroll 16
      for (int64_t g = 0; g < (R + 2) / 3; ++g) a[g] = A + (r0 + 3 * g) * lda;
    } else {
#pragma GCC unroll 16
      for (int64_t g = 0; g < R; ++g) a[g] = A + std::min(r0 + g, M - 1) * lda;
    }
    typename L::Vec acc[R];  // every loop over g unrolled, so acc stays in registers
#pragma GCC unroll 16
    for (int64_t g = 0; g < R; ++g) acc[g] = L::zero();
    for (int64_t k = 0; k < K; ++k) {
      const typename L::Vec b = L::load(lanes, b_data + k * ldb);
#pragma GCC unroll 16
      for (int64_t g = 0; g < R; ++g) {
        const float x = TA ? a[0][k * lda + g] : kFit ? a[g / 3][g % 3 * lda + k] : a[g][k];
        acc[g] = L::fma(x, b, acc[g]);
      }
    }
#pragma GCC unroll 16
    for (int64_t g = 0; g < R; ++g) {
      if (r0 + g >= M) break;
      float* c = p.C + (r0 + g) * ldc;
      typename L::Vec sum = acc[g];
      if (p.beta != 0) sum = L::fma(p.beta, L::load(lanes, c), sum);
      L::store(c, lanes, sum);
    }
  }
}

// Rows [r0, r0 + R) of C with R the fewest whole kSteps that hold the `left` rows from r0,
// reading A's rows by a pointer every third row where all are below M.
template <class L, bool TA, int64_t R = L::kRows>
void tile_pass(int64_t r0, int64_t left, const Product<float>& p) {
  if constexpr (R > L::kStep) {
    if (left <= R - L::kStep) return tile_pass<L, TA, R - L::kStep>(r0, left, p);
  }
  const bool fit = !TA && r0 + R <= p.M;
  (fit ? tile_rows<R, TA, true, L> : tile_rows<R, TA, false, L>)(r0, p);
}

// p's product on lanes L: up to kRows rows at a time, as many as are left rounded up to
// kStep, so a head of 12 takes one pass over K where a pass holds 12 rows, not two with 4 rows
// of repeats (with ta, A is a tile: its rows TP >= M long hold the rounded-up columns).
template <class L>
void tile_passes(const Product<float>& p) {
  for (int64_t r0 = 0; r0 < p.M; r0 += L::kRows) {
    (p.ta ? tile_pass<L, true> : tile_pass<L, false>)(r0, p.M - r0, p);
  }
}

// p's product, N at most 16 (a head's D, or a tile's TP lanes): each row of C is one vector of
// N lanes (or two of 8), its sum a chain of multiply-adds by elements of A, broadcast from where
// they lie (in a tile, a row or a column); past D lie the next head's columns, another
// thread's. On the narrowest lanes that hold N. Nothing is packed or transposed.
template <class F>
void tile_kernel(const Product<F>& p) {
  if constexpr (kRegisterTiles<F>) {
    if (p.N <= 8) {
      tile_passes<Lanes8>(p);
    } else {
      tile_passes<Lanes16>(p);
    }
  }
}

// C = beta C + op(A) B as gemm takes it, for an item's products (of its tile, its head's
// blocks, q's transposed copy): on the tile kernel where the head fits (tiles: tile_head), else
// gemm.
template <class F>
void tile_product(bool tiles, Precision precision, const Product<F>& p) {
  if (tiles) {
    tile_kernel<F>(p);
  } else {
    gemm<F>(precision, p.ta, false, p.M, p.N, p.K, p.A, p.lda, p.B.data, p.B.ld, p.beta, p.C,
            p.ldc);
  }
}

// The transpose of a batch item's whole block of q (or dout), [T, C] -> [C, TP], made once for
// the item's heads (as one head C wide: transpose_head), where a head's own transpose (a small
// model's, 8 columns) would take as many register transposes for half the columns: head h's
// (D, TP) block starts at row h D. Rounded when bf16.
template <class F>
struct ItemTranspose {
  std::vector<F> rows;  // [C, TP], zeros past T
  int64_t item = -1;    // the batch item the rows hold

  // Head n's block of the transpose of `all` ([B, T, C]).
  const F* of(const F* all, int64_t n, const Heads& x, bool bf16) {
    if (n / x.H != item) {
      item = n / x.H;
      Heads whole = x;
      whole.D = x.C;
      transpose_head<F>(rows.data(), all + item * x.T * x.C, (x.B - item) * x.T * x.C, whole, bf16);
    }
    return rows.data() + (n % x.H) * x.D * x.TP;
  }
};

// scores^T (S, TP) = kb (S, D) q_bh^T of item n's head, pad columns zero (q_bh's rows C apart
// in q, [B, T, C]): in bfloat16 (precision) reading q by rows; else through the transpose of
// q's item (`transposed`, zero past T), rounded when bf16, on the tile kernel where it fits.
template <class F>
void head_scores(F* scores, const F* q_all, int64_t n, Block<F> kb, const Heads& x,
                 Precision precision, bool bf16, ItemTranspose<F>& transposed) {
  if (precision == Precision::BFloat16) {
    gemm<F>(precision, false, true, x.S, x.T, x.D, kb.data, kb.ld, q_all + x.q_at(n), x.C, F{0},
            scores, x.TP);
    zero_pad(scores, x.S, x.T, x.TP);
    return;
  }
  const Block<F> qt{transposed.of(q_all, n, x, bf16), x.TP};
  tile_product<F>(tile_head<F>(x, precision), precision,
                  {false, x.S, x.TP, x.D, kb.data, kb.ld, qt, F{0}, scores, x.TP});
}

// The weights (S, TP) the product with v reads: p itself, or p times its dropout factors
// (factor; null: none) and rounded to bfloat16 (bf16), written to `dropped` (in place when p
// is dropped).
template <class F>
const F* product_weights(const F* p, const F* factor, bool bf16, int64_t tile, F* dropped) {
  if (!factor && !bf16) return p;
  if (factor || p != dropped) {
    for (int64_t e = 0; e < tile; ++e) dropped[e] = factor ? p[e] * factor[e] : p[e];
  }
  round_in_place(dropped, tile, bf16);
  return dropped;
}

// scores (1, S) of a single query row (a decoding step): q . k_j for the S keys, rows C apart.
// gemm would first copy k transposed, as long as the products themselves; here each key is
// read once, a D-long dot product in vectors of 64 bytes.
template <class F>
void one_query_scores(const F* q, const F* k, int64_t C, int64_t S, int64_t D, F* scores) {
  constexpr int64_t W = 64 / sizeof(F);
  typedef F Vec __attribute__((vector_size(W * sizeof(F))));
  const int64_t whole = D / W * W;
  for (int64_t j = 0; j < S; ++j) {
    const F* key = k + j * C;
    Vec acc{};
    for (int64_t d = 0; d < whole; d += W) {
      Vec a, b;
      std::memcpy(&a, q + d, sizeof a);
      std::memcpy(&b, key + d, sizeof b);
      acc += a * b;
    }
    F lanes[W];  // summed pairwise: log2(W) rounds of independent adds, not a chain of W
    std::memcpy(lanes, &acc, sizeof lanes);
#pragma GCC unroll 16
    for (int64_t w = W / 2; w > 0; w /= 2) {
      for (int64_t l = 0; l < w; ++l) lanes[l] += lanes[l + w];
    }
    F sum = lanes[0];
    for (int64_t d = whole; d < D; ++d) sum += q[d] * key[d];
    scores[j] = sum;
  }
}

// The recorded backward of fast_attention, items [n0, n1) a thread. With P the weights,
// P' = dropout(P), dS the gradient of the scaled scores:
//   dv_bh = P'^T dout_bh          dP' = dout_bh v_bh^T
//   dP = dP' * keep * dropout_scale
//   dS = scale * P * (dP - rowsum(dP * P))            (softmax_backward_rows)
//   dq_bh = dS k_bh               dk_bh = dS^T q_bh
// Each item writes its slices in the order q, k, v, so when two of q, k, v are one tensor (and
// the caller took its buffers in that order) its first writer goes first.
template <class F>
struct AttentionBackward {
  const Heads& x;
  const F *q, *k, *v, *weights, *dout;  // weights: transposed tiles (S, TP), as the forward's
  F* const* dgrad;                      // dq, dk, dv: null where not wanted
  const F* beta;                        // 0 where a gradient's first writer, else 1
  // the dropout's kept flags (T > 1), else null: a single query's factors come from the mask
  const uint16_t* kept;
  DropoutMask mask;
  double dropout;
  bool bf16;  // a tiny head's operands rounded here (Note [attention under autocast])
  Precision precision;

  // A thread's tiles (S, TP) and, under autocast, a tiny head's rounded blocks.
  struct Scratch {
    std::vector<F> ds, dropped, factor, q_head, k_head, v_head, dout_head;
    ItemTranspose<F> transposed;  // dout's
  };

  // s.ds = dS of item n, rounded when bf16; with kept flags and dv wanted, s.dropped = P' too.
  void scores_gradient(int64_t n, const uint16_t* keep, Scratch& s) const {
    const int64_t S = x.S, TP = x.TP, tile = S * TP;
    const F* p = weights + n * tile;
    const auto scale = static_cast<F>(1.0 / std::sqrt(static_cast<double>(x.D)));
    // dP'^T (S, T) = v_bh (S, D) dout_bh^T, through the dropout, then the softmax
    const Block<F> vb = head_block<F>(v + x.kv_at(n), S, x.C, x.D, bf16, s.v_head.data());
    head_scores<F>(s.ds.data(), dout, n, vb, x, precision, bf16, s.transposed);
    if (dropout > 0 && !keep) {
      for (int64_t e = 0; e < tile; ++e) s.ds[e] *= s.factor[e];
    }
    if (x.T == 1) {  // one row of S, as the forward's softmax ran
      const auto assign = [](F& dst, F value) { dst = value; };
      detail::softmax_backward_rows<F>(assign, s.ds.data(), s.ds.data(), p, detail::Rows{1, S, 1},
                                       false, 0, 1, scale);
    } else {  // through the dropout first, with kept flags
      softmax_columns_backward<F>(s.ds.data(), p, S, TP, scale, keep,
                                  static_cast<F>(dropout_scale(dropout)),
                                  keep && dgrad[2] ? s.dropped.data() : nullptr);
    }
    round_in_place(s.ds.data(), tile, bf16);
  }

  void items(int64_t n0, int64_t n1) const {
    const int64_t T = x.T, S = x.S, D = x.D, C = x.C, TP = x.TP, tile = S * TP;
    const int64_t rounded = bf16 ? T * D : 0, rounded_kv = bf16 ? S * D : 0;
    const bool tiles = tile_head<F>(x, precision);
    Scratch s{std::vector<F>(tile),
              std::vector<F>(dropout > 0 || bf16 ? tile : 0),
              std::vector<F>(dropout > 0 && !kept ? tile : 0),
              std::vector<F>(rounded),
              std::vector<F>(rounded_kv),
              std::vector<F>(rounded_kv),
              std::vector<F>(rounded),
              {std::vector<F>(precision == Precision::BFloat16 ? 0 : C * TP)}};
    for (int64_t n = n0; n < n1; ++n) {
      const F* p = weights + n * tile;
      const uint16_t* keep = kept ? kept + n * (S * TP / kTileLanes) : nullptr;
      if (dropout > 0 && !keep) dropout_factors<F>(s.factor.data(), x, n, mask, dropout);
      if (dgrad[0] || dgrad[1]) scores_gradient(n, keep, s);
      if (dgrad[0]) {
        const Block<F> kb = head_block<F>(k + x.kv_at(n), S, C, D, bf16, s.k_head.data());
        tile_product<F>(tiles, precision,
                        {true, T, D, S, s.ds.data(), TP, kb, beta[0], dgrad[0] + x.q_at(n), C});
      }
      if (dgrad[1]) {
        const Block<F> qb = head_block<F>(q + x.q_at(n), T, C, D, bf16, s.q_head.data());
        tile_product<F>(tiles, precision,
                        {false, S, D, T, s.ds.data(), TP, qb, beta[1], dgrad[1] + x.kv_at(n), C});
      }
      if (!dgrad[2]) continue;
      // with kept flags, the dropped weights came from scores_gradient, or come here
      if (keep && !dgrad[0] && !dgrad[1]) {
        kept_weights<F>(s.dropped.data(), p, keep, S, TP, static_cast<F>(dropout_scale(dropout)));
      }
      const F* pdrop =
          keep ? product_weights<F>(s.dropped.data(), nullptr, bf16, tile, s.dropped.data())
               : product_weights<F>(p, dropout > 0 ? s.factor.data() : nullptr, bf16, tile,
                                    s.dropped.data());
      const Block<F> db = head_block<F>(dout + x.q_at(n), T, C, D, bf16, s.dout_head.data());
      tile_product<F>(tiles, precision,
                      {false, S, D, T, pdrop, TP, db, beta[2], dgrad[2] + x.kv_at(n), C});
    }
  }
};

}  // namespace

Tensor fast_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, int64_t heads,
                      const Tensor& blocked, double p, uint64_t key, Tensor* weights_out) {
  const int64_t B = q_in.size(0), T = q_in.size(1), C = q_in.size(2), S = k_in.size(1);
  const bool drop = p > 0;
  const Shape wshape{B, heads, T, S};
  Heads x{B, heads, T, S, C / heads, C, S * C, tile_row(T), {}};
  if (blocked.defined())
    x.mask_strides = broadcast_strides(blocked.shape(), blocked.strides(), wshape);
  // bfloat16 products under autocast, a tiny head's operands rounded here (bf16) and a larger
  // one's by gemm (Note [attention under autocast])
  const bool autocast = product_precision(q_in.dtype()) == Precision::BFloat16;
  const bool bf16 = autocast && (T == 1 || small_product(false, S, x.TP, x.D));
  const Precision precision = autocast && !bf16 ? Precision::BFloat16 : Precision::Float32;
  // k and v rows packed at stride C with the same batch stride can be read where they are
  const Shape& ks = k_in.strides();
  const bool graph = recording(q_in, k_in, v_in);
  const bool in_place = !graph && ks == v_in.strides() && ks[2] == 1 && (S == 1 || ks[1] == C) &&
                        (B == 1 || ks[0] >= S * C);
  const Tensor q = q_in.contiguous();
  const Tensor k = in_place ? k_in : k_in.contiguous(), v = in_place ? v_in : v_in.contiguous();
  if (in_place && B > 1) x.kv_batch = ks[0];
  const uint8_t* pm = blocked.defined() ? mask_bytes(blocked) : nullptr;
  const DropoutMask mask(p, key);
  const double dropout = p;
  TG_CHECK(!drop || T * S <= int64_t{1} << 32,
           "attention: dropout on a head of {} x {} scores, over 2^32 of them, is not supported", T,
           S);
  // two products a head: scores q k^T and the weighted values, 2 T S D flops each
  const double product_flops = 2.0 * static_cast<double>(B * heads) * static_cast<double>(T) *
                               static_cast<double>(S) * static_cast<double>(x.D);
  profile::note_flops(2 * product_flops);
  Tensor out = empty({B, T, C}, q.dtype());
  // The softmax weights, [B, H, S, TP] (each tile transposed), which backward keeps; when
  // nothing keeps them (no graph, no caller asking), each thread's tile is scratch that stays
  // in cache instead of being written out to memory.
  const bool keep_weights = graph || weights_out != nullptr;
  const int64_t TP = x.TP, tile = S * TP;
  Tensor weights = keep_weights ? empty({B, heads, S, TP}, q.dtype()) : Tensor();
  // The dropout's kept flags (TileDropout), which backward keeps: words of 16 bits, held by an
  // int64 tensor (4 a value); with nothing recorded, each thread's are scratch.
  const int64_t words = drop && T > 1 ? S * TP / kTileLanes : 0;
  const bool keep_flags = graph && words > 0;
  Tensor kept = keep_flags ? empty({(B * heads * words + 3) / 4}, DType::Int64) : Tensor();
  dispatch_floating("attention", q.dtype(), [&](auto tag) {
    using F = decltype(tag);
    const auto scale = static_cast<F>(1.0 / std::sqrt(static_cast<double>(x.D)));
    const F *pq = q.data<F>(), *pk = k.data<F>(), *pv = v.data<F>();
    F* pw = keep_weights ? weights.data<F>() : nullptr;
    F* po = out.data<F>();
    auto* pkept = keep_flags ? reinterpret_cast<uint16_t*>(kept.data<int64_t>()) : nullptr;
    const bool tiles = tile_head<F>(x, precision);
    parallel_for(B * heads, x.grain(), [&](int64_t n0, int64_t n1) {
      std::vector<F> scratch(keep_weights ? 0 : tile), dropped(drop || bf16 ? tile : 0);
      std::vector<uint16_t> flags(keep_flags ? 0 : words);
      // q's transposed copy, which only a float32 scores product reads (head_scores)
      ItemTranspose<F> transposed{std::vector<F>(precision == Precision::BFloat16 ? 0 : C * TP)};
      std::vector<F> bias(pm ? tile : 0);
      // a tiny head's rounded blocks of q (one query), k and v under autocast
      std::vector<F> q_head(bf16 ? x.D : 0), k_head(bf16 ? S * x.D : 0), v_head(k_head.size());
      int64_t bias_of = -1;  // the mask offset bias was made for
      const int64_t row_zero = 0;
      for (int64_t n = n0; n < n1; ++n) {
        F* p = keep_weights ? pw + n * tile : scratch.data();
        const Block<F> kb = head_block<F>(pk + x.kv_at(n), S, C, x.D, bf16, k_head.data());
        // scores^T (S, T) = k_bh (S, D) q_bh^T, then p = softmax(scale * scores | blocked)^T
        if (T == 1) {
          const Block<F> qb = head_block<F>(pq + x.q_at(n), 1, C, x.D, bf16, q_head.data());
          one_query_scores<F>(qb.data, kb.data, kb.ld, S, x.D, p);
          static constexpr uint8_t kNothingBlocked = 0;
          detail::masked_softmax_forward<F>(p, p, pm ? pm + x.mask_at(n) : &kNothingBlocked,
                                            &row_zero, pm ? x.mask_strides[3] : 0, S, scale, 0, 1);
        } else {
          head_scores<F>(p, pq, n, kb, x, precision, bf16, transposed);
          if (pm && x.mask_at(n) != bias_of) {
            mask_tile<F>(bias.data(), x, n, pm);
            bias_of = x.mask_at(n);
          }
          // the weights times their dropout factors, made as the softmax writes them
          const TileDropout<F> tile_drop{DropoutRun(mask, static_cast<uint64_t>(n * T * S)),
                                         static_cast<F>(dropout_scale(dropout))};
          softmax_columns<F>(p, x, pm ? bias.data() : nullptr, scale, drop ? &tile_drop : nullptr,
                             dropped.data(), keep_flags ? pkept + n * words : flags.data());
        }
        // a single query's: the weights times their dropout factors, made in one pass
        if (drop && T == 1) dropout_factors<F>(dropped.data(), x, n, mask, dropout, p);
        // out_bh (T, D) = dropout(p) (T, S) v_bh (S, D)
        const Block<F> vb = head_block<F>(pv + x.kv_at(n), S, C, x.D, bf16, v_head.data());
        tile_product<F>(
            tiles, precision,
            {true, T, x.D, S,
             product_weights<F>(drop ? dropped.data() : p, nullptr, bf16, tile, dropped.data()), TP,
             vb, F{0}, po + x.q_at(n), C});
      }
    });
  });
  if (weights_out) *weights_out = transpose(slice(weights, 3, 0, T), 2, 3);

  if (graph) {
    record(op_name("attention"), {q, k, v}, out,
           {.fast =
                [q = q.detach(), k = k.detach(), v = v.detach(), weights, kept, x, mask, dropout,
                 product_flops, bf16, precision](const Tensor& dout_in, Grads& g) {
                  // dP' always, then one product for each of dq, dk, dv wanted
                  profile::note_flops(
                      product_flops *
                      (1 + (g.wants(0) ? 1 : 0) + (g.wants(1) ? 1 : 0) + (g.wants(2) ? 1 : 0)));
                  const Tensor dout = dout_in.contiguous();
                  dispatch_floating("attention", dout.dtype(), [&](auto tag) {
                    using F = decltype(tag);
                    // the buffers in the order q, k, v (AttentionBackward)
                    F* dgrad[3] = {nullptr, nullptr, nullptr};
                    F beta[3] = {F{1}, F{1}, F{1}};
                    for (size_t i = 0; i < 3; ++i) {
                      if (!g.wants(i)) continue;
                      const auto [grad, first] = g.write(i, Writes::Every);
                      dgrad[i] = grad.data<F>();
                      beta[i] = first ? F{0} : F{1};
                    }
                    const AttentionBackward<F> backward{
                        x,
                        q.data<F>(),
                        k.data<F>(),
                        v.data<F>(),
                        weights.data<F>(),
                        dout.data<F>(),
                        dgrad,
                        beta,
                        kept.defined() ? reinterpret_cast<const uint16_t*>(kept.data<int64_t>())
                                       : nullptr,
                        mask,
                        dropout,
                        bf16,
                        precision};
                    parallel_for(x.B * x.H, x.grain(),
                                 [&](int64_t n0, int64_t n1) { backward.items(n0, n1); });
                  });
                },
            .reference =
                [q = q.detach(), k = k.detach(), v = v.detach(), heads, blocked, dropout,
                 key = mask.key](Grads& g) {
                  return std::vector{attention_reference(
                      g.input(0, q), g.input(1, k), g.input(2, v), heads, blocked, dropout, key)};
                }},
           {{"q", q}, {"k", k}, {"v", v}, {"weights", weights}, {"dropout's kept flags", kept}});
  }
  return out;
}

}  // namespace tapegrad
