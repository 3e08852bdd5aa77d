// The bfloat16 product (gemm_bf16.h) on the CPU's kernels, in sgemm's loop nest (gemm.cpp):
// blocks of NC columns, KC steps and MC rows, the operands packed into panels of MR rows and NR
// columns, and a register tile of MR x NR float32 sums. What differs is the packing: it rounds each
// value to bfloat16 and lays two steps of k side by side in 32 bits (k's in the low half, k + 1's
// in the high), the pair vdpbf16ps multiplies with the same pair of the other operand and adds to
// one float32 lane. An A pair is broadcast to all lanes; a B panel holds NR pairs a step. K is
// padded to even with zeros. The CPU kernel's packers convert 32 values an instruction, one for
// each layout (a step's lines consecutive; a line's steps consecutive, through a transpose in
// registers; a row-major A into row-major panels, which needs none), and take their masked loads
// and stores only where lines or steps run out: packing is most of what is not arithmetic. The
// float32 multiply-add kernel reads A's pairs as the two floats they round to, packed so straight
// from A. A CPU without AVX512_BF16 runs rounded_sgemm (gemm.cpp) instead.
#include "tapegrad/autograd/fast/gemm_bf16.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "tapegrad/autograd/error.h"

namespace tapegrad {

namespace {

#if defined(__x86_64__)
constexpr int64_t MR = 12, NR = 32;  // NR: two vectors of 16 float32 lanes
constexpr int64_t KC = 512, MC = MR * 12, NC = NR * 64;
constexpr int64_t KP = KC / 2;  // a row-major A panel's row stride, in pairs

// c (MR x NR, rows ldc apart) = the sums over `pairs` of the A panel's pairs (MR a pair) times
// the B panel's (NR a pair), added to c's values with add: per pair, the high halves' product
// added, then the low halves'. A's pair (i, p) is at a[i * kRow + p * kPair]: a pair-major panel
// (kRow 1, kPair MR; pack_steps_native) or a row-major one (kRow KP, kPair 1; pack_rows),
// each broadcast from a constant offset.
template <int64_t kRow, int64_t kPair>
__attribute__((target("avx512f,avx512bf16"))) void tile_native(int64_t pairs, const uint32_t* a,
                                                               const uint32_t* b, float* c,
                                                               int64_t ldc, bool add) {
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int64_t i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p, a += kPair, b += NR) {
    const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 16);
#pragma GCC unroll 12
    for (int64_t i = 0; i < MR; ++i) {
      const __m512i ai = _mm512_set1_epi32(static_cast<int>(a[i * kRow]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], (__m512bh)ai, (__m512bh)b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], (__m512bh)ai, (__m512bh)b1);
    }
  }
  if (add) {
#pragma GCC unroll 12
    for (int64_t i = 0; i < MR; ++i) {
      acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_loadu_ps(c + i * ldc));
      acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_loadu_ps(c + i * ldc + 16));
    }
  }
#pragma GCC unroll 12
  for (int64_t i = 0; i < MR; ++i) {
    _mm512_storeu_ps(c + i * ldc, acc[i][0]);
    _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
  }
}

// tile_native's sums with float32 multiply-adds, for CPUs whose vdpbf16ps takes more than two of
// them (bf16_default_kernel): A's pairs as rounded floats (pack_rows, pack_steps_fma: for the
// pair at x, the high step's value at a[2 x], the low's at a[2 x + 1]), B's split in registers.
// Subnormal operands read as zero and subnormal sums flush to zero while the sums run, as the
// instruction is specified to, so the two kernels give the same bits on all inputs; c's values,
// with add, are added after, as tile_native adds them.
template <int64_t kRow, int64_t kPair>
__attribute__((target("avx512f"))) void tile_fma(int64_t pairs, const float* a, const uint32_t* b,
                                                 float* c, int64_t ldc, bool add) {
  const unsigned int csr = _mm_getcsr();
  _mm_setcsr(csr | _MM_FLUSH_ZERO_ON | 0x0040);  // 0x0040: denormals are zeros
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int64_t i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p, a += 2 * kPair, b += NR) {
    const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 16);
    const __m512 b0_hi = _mm512_castsi512_ps(_mm512_and_si512(b0, high));
    const __m512 b1_hi = _mm512_castsi512_ps(_mm512_and_si512(b1, high));
    const __m512 b0_lo = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, b0, 16));
    const __m512 b1_lo = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, b1, 16));
#pragma GCC unroll 12
    for (int64_t i = 0; i < MR; ++i) {
      const __m512 hi = _mm512_set1_ps(a[2 * i * kRow]), lo = _mm512_set1_ps(a[2 * i * kRow + 1]);
      acc[i][0] = _mm512_fmadd_ps(lo, b0_lo, _mm512_fmadd_ps(hi, b0_hi, acc[i][0]));
      acc[i][1] = _mm512_fmadd_ps(lo, b1_lo, _mm512_fmadd_ps(hi, b1_hi, acc[i][1]));
    }
  }
  _mm_setcsr(csr);
  if (add) {
#pragma GCC unroll 12
    for (int64_t i = 0; i < MR; ++i) {
      acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_loadu_ps(c + i * ldc));
      acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_loadu_ps(c + i * ldc + 16));
    }
  }
#pragma GCC unroll 12
  for (int64_t i = 0; i < MR; ++i) {
    _mm512_storeu_ps(c + i * ldc, acc[i][0]);
    _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
  }
}

// The first n of 16 lanes; of 32.
__mmask16 first(int64_t n) {
  return static_cast<__mmask16>((1u << std::clamp<int64_t>(n, 0, 16)) - 1);
}
__mmask32 first32(int64_t n) {
  return static_cast<__mmask32>((uint64_t{1} << std::clamp<int64_t>(n, 0, 32)) - 1);
}

// 16 lines' values at two steps as 16 pairs: lo's rounded to bfloat16 in the low half of each
// 32-bit lane, hi's in the high half (one conversion of both, then the halves interleaved).
__attribute__((target("avx512f,avx512bw,avx512bf16"))) __m512i pairs_of(__m512 lo, __m512 hi) {
  const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24,
                                         8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(order, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
}

// The first n (take) of 16 lines at a step (at) and at the next (at + k_step; with hi false,
// zeros) as 16 pairs: floats through pairs_of, bfloat16s interleaved.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) __m512i step_pairs(const float* at,
                                                                          int64_t k_step,
                                                                          __mmask16 take, bool hi) {
  return pairs_of(_mm512_maskz_loadu_ps(take, at),
                  hi ? _mm512_maskz_loadu_ps(take, at + k_step) : _mm512_setzero_ps());
}
__attribute__((target("avx512f,avx512bw"))) __m512i step_pairs(const uint16_t* at, int64_t k_step,
                                                               __mmask16 take, bool hi) {
  const __m512i order = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40,
                                         8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i high = hi ? _mm512_maskz_loadu_epi16(take, at + k_step) : _mm512_setzero_si512();
  return _mm512_permutex2var_epi16(_mm512_maskz_loadu_epi16(take, at), order, high);
}

// Lines [0, lines) and steps [0, kc) of an operand (floats, or bfloat16s: S) as bfloat16 pairs
// in panels of W lines, each pair-major: out[panel][p][r] = (line r at step 2p, at step 2p + 1),
// the line at step k being src[line + k * k_step] (a line is a row of op(A) or a column of
// op(B)); past the lines or the steps, zeros. A step's lines are consecutive values (B of a plain
// product, a transposed A): 16 lines of two steps become 16 pairs (step_pairs), with the CPU's
// conversion (vcvtneps2bf16 rounds as to_bf16 does). The steps are taken G pairs at a time, every
// panel's part of them before the next G: one panel's walk down all the steps would read a piece of
// each of kc rows, and rows a multiple of 2 KiB apart (a weight gradient's dh and x, 512 or 2048
// wide) share a few sets of L1 and evict each other; 2G rows fit. The next group's rows are fetched
// while this group's are packed.
template <int64_t W, class S>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void pack_steps_native(
    const S* src, int64_t, int64_t k_step, int64_t lines, int64_t kc, uint32_t* out) {
  constexpr int64_t G = 4;
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t g0 = 0; g0 < pairs; g0 += G) {
    const int64_t g1 = std::min(pairs, g0 + G);
    prefetch_steps(src, k_step, 2 * g1, std::min(kc, 2 * (g1 + G)), lines);
    for (int64_t l0 = 0; l0 < lines; l0 += W) {
      uint32_t* panel = out + l0 * pairs;
      for (int64_t r0 = 0; r0 < W; r0 += 16) {
        const __mmask16 take = first(lines - l0 - r0), put = first(W - r0);
        int64_t p = g0;
        // 16 real lines: whole pairs unmasked. A panel of 12 lines (A's) stores 16 lanes a
        // pair too: the 4 past its 12 land on the next pair's first, which its own store writes
        // after; but a panel's last pair, whose 4 would land on the next panel's first pair,
        // already written, takes the masked store.
        if (take == 0xffff) {
          for (; p < g1 && 2 * p + 1 < kc && (W % 16 == 0 || p + 1 < pairs); ++p) {
            const S* at = src + l0 + r0 + 2 * p * k_step;
            _mm512_storeu_si512(panel + p * W + r0, step_pairs(at, k_step, 0xffff, true));
          }
        }
        for (; p < g1; ++p) {
          const S* at = src + l0 + r0 + 2 * p * k_step;
          _mm512_mask_storeu_epi32(panel + p * W + r0, put,
                                   step_pairs(at, k_step, take, 2 * p + 1 < kc));
        }
      }
    }
  }
}

// The permutes of a 16 x 16 transpose, stage s (blocks of b = 8 >> s): row i (bit b clear) and
// row i + b exchange their off-diagonal b x b blocks, as transpose16.h's transpose does.
struct TransposeIndex {
  int32_t low[4][16], high[4][16];
};
constexpr TransposeIndex kTranspose = [] {
  TransposeIndex t{};
  for (int s = 0; s < 4; ++s) {
    const int b = 8 >> s;
    for (int j = 0; j < 16; ++j) {
      t.low[s][j] = (j & b) ? 16 + (j ^ b) : j;
      t.high[s][j] = (j & b) ? 16 + j : (j ^ b);
    }
  }
  return t;
}();

__attribute__((target("avx512f"))) void transpose16(__m512i (&rows)[16]) {
#pragma GCC unroll 4
  for (int s = 0; s < 4; ++s) {
    const int b = 8 >> s;
    const __m512i low = _mm512_loadu_si512(kTranspose.low[s]);
    const __m512i high = _mm512_loadu_si512(kTranspose.high[s]);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      if (i & b) continue;
      const __m512i x = rows[i], y = rows[i + b];
      rows[i] = _mm512_permutex2var_epi32(x, low, y);
      rows[i + b] = _mm512_permutex2var_epi32(x, high, y);
    }
  }
}

// The same where a line's steps are consecutive floats (a transposed B: a linear layer's
// weights), into panels of NR lines: 32 steps of each of 16 lines become their 16 pairs in
// order (one conversion a line), and a transpose in registers turns those into 16 rows of a
// panel, a pair of each line.
__attribute__((target("avx512f,avx512bf16"))) void pack_lines_native(const float* src,
                                                                     int64_t l_step, int64_t,
                                                                     int64_t lines, int64_t kc,
                                                                     uint32_t* out) {
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t l0 = 0; l0 < lines; l0 += NR) {
    uint32_t* panel = out + l0 * pairs;
    for (int64_t r0 = 0; r0 < NR; r0 += 16) {
      for (int64_t k0 = 0; k0 < kc; k0 += 32) {
        __m512i rows[16];
        for (int64_t r = 0; r < 16; ++r) {
          const float* line = src + (l0 + r0 + r) * l_step + k0;
          // the next 16 lines' same steps, asked for now: spread between the loads, they
          // arrive before that group reads them, where its loads alone would wait on each
          // line in turn (a head's q: 200 rows 2 KB apart)
          if (l0 + r0 + r + 16 < lines) {
            __builtin_prefetch(line + 16 * l_step);
            __builtin_prefetch(line + 16 * l_step + 16);
          }
          const int64_t n = l0 + r0 + r < lines ? std::min<int64_t>(32, kc - k0) : 0;
          const __m512 x0 = _mm512_maskz_loadu_ps(first(n), line);
          const __m512 x1 = _mm512_maskz_loadu_ps(first(n - 16), line + 16);
          rows[r] = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(x1, x0));
        }
        transpose16(rows);
        const int64_t count = std::min<int64_t>(16, pairs - k0 / 2);
        for (int64_t q = 0; q < count; ++q) {
          _mm512_storeu_si512(panel + (k0 / 2 + q) * NR + r0, rows[q]);
        }
      }
    }
  }
}

// The 16 values at `at` that `take` has (the rest zero), rounded to bfloat16, as floats: floats
// through the CPU's conversion; bfloat16s widened as they lie. (The all-lanes masks keep GCC from
// reading the unmasked forms' undefined source as used.)
__attribute__((target("avx512f"))) __m512 widened(__m256i bf16s) {
  return _mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, bf16s), 16));
}
__attribute__((target("avx512f,avx512bf16"))) __m512 rounded16(const float* at, __mmask16 take) {
  return widened((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(take, at)));
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) __m512 rounded16(const uint16_t* at,
                                                                      __mmask16 take) {
  return widened(_mm256_maskz_loadu_epi16(take, at));
}

// A line's next steps as a row of a packed A reads them, the first n real (the rest zero): for
// tile_native, 32 steps as their 16 pairs (floats with one conversion; bfloat16s are pairs as
// they lie); for tile_fma, 16 steps rounded, as floats, each pair's two swapped (k + 1's first).
__attribute__((target("avx512f,avx512bf16"))) __m512i row_pairs(const float* at, int64_t n) {
  const __m512 x0 = _mm512_maskz_loadu_ps(first(n), at);
  const __m512 x1 = _mm512_maskz_loadu_ps(first(n - 16), at + 16);
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(x1, x0));
}
__attribute__((target("avx512f,avx512bw"))) __m512i row_pairs(const uint16_t* at, int64_t n) {
  return _mm512_maskz_loadu_epi16(first32(n), at);
}
template <class S>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) __m512i row_floats(const S* at,
                                                                                   int64_t n) {
  return _mm512_castps_si512(_mm512_maskz_permute_ps(0xffff, rounded16(at, first(n)), 0xb1));
}

// Lines [0, lines) of a row-major op(A) (line r at src + r * l_step, its steps consecutive),
// steps [0, kc), as row-major panels of MR lines, line r's row at out + r * row_lanes (in 32-bit
// lanes): tile_native's pairs (kSteps 32, kLanes row_pairs: out[panel][r][p] = (line r at step
// 2p, at step 2p + 1)) or tile_fma's floats (kSteps 16, row_floats). kSteps steps of a line
// become 16 lanes with one store, masked only where the steps run out; past them, and on lines
// past `lines`, zeros.
template <int64_t kSteps, class S, __m512i (*kLanes)(const S*, int64_t)>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void pack_rows(
    const S* src, int64_t l_step, int64_t kc, int64_t lines, uint32_t* out, int64_t row_lanes) {
  constexpr int64_t kPer = kSteps / 16;            // steps a lane
  const int64_t filled = (kc + 1) / 2 * 2 / kPer;  // the lanes of a row's steps, padded to even
  for (int64_t l0 = 0; l0 < lines; l0 += MR) {
    for (int64_t r = 0; r < MR; ++r) {
      const S* line = src + (l0 + r) * l_step;
      uint32_t* row = out + (l0 + r) * row_lanes;
      int64_t k0 = 0;
      if (l0 + r < lines) {  // whole vectors of a real line
        for (; k0 + kSteps <= kc; k0 += kSteps) {
          _mm512_storeu_si512(row + k0 / kPer, kLanes(line + k0, kSteps));
        }
      }
      for (; k0 < kc; k0 += kSteps) {
        const int64_t n = l0 + r < lines ? std::min(kSteps, kc - k0) : 0;
        _mm512_mask_storeu_epi32(row + k0 / kPer, first(filled - k0 / kPer), kLanes(line + k0, n));
      }
    }
  }
}

// pack_steps_native's lines and steps as tile_fma reads them, in panels of MR lines:
// out[panel][p][2 r] = line r's value at step 2p + 1 rounded, out[panel][p][2 r + 1] = at step
// 2p; past the lines or the steps, zeros. A pair's two rows are read once for every panel, the
// next pair's asked for meanwhile; a panel's 12 lines at both steps become its 24 values with
// two interleaving permutes.
template <class S>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void pack_steps_fma(
    const S* src, int64_t k_step, int64_t lines, int64_t kc, float* out) {
  const __m512i first8 = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i last8 = _mm512_add_epi32(first8, _mm512_set1_epi32(8));
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t p = 0; p < pairs; ++p) {
    prefetch_steps(src, k_step, 2 * p + 2, std::min(kc, 2 * p + 4), lines);
    for (int64_t l0 = 0; l0 < lines; l0 += MR) {
      const __mmask16 take = first(std::min(MR, lines - l0));
      const S* at = src + l0 + 2 * p * k_step;
      const __m512 lo = rounded16(at, take);
      const __m512 hi = 2 * p + 1 < kc ? rounded16(at + k_step, take) : _mm512_setzero_ps();
      float* panel = out + 2 * (l0 * pairs + p * MR);
      _mm512_storeu_ps(panel, _mm512_permutex2var_ps(hi, first8, lo));
      _mm512_mask_storeu_ps(panel + 16, 0xff, _mm512_permutex2var_ps(hi, last8, lo));
    }
  }
}

// The seconds of 4096 rounds of 12 independent vdpbf16ps (native) or vfmadd231ps, best of 5.
template <bool kNative>
__attribute__((target("avx512f,avx512bf16"))) double rounds_seconds() {
  double best = 1e9;
  for (int run = 0; run < 5; ++run) {
    __m512 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));  // not one sum
    const __m512 one = _mm512_set1_ps(1.0f);
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < 4096; ++r) {
#pragma GCC unroll 12
      for (__m512& x : acc) {
        x = kNative ? _mm512_dpbf16_ps(x, (__m512bh)one, (__m512bh)one)
                    : _mm512_fmadd_ps(one, one, x);
      }
    }
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    __m512 sum = _mm512_setzero_ps();
    for (const __m512& x : acc) sum = _mm512_add_ps(sum, x);
    float lanes[16];
    _mm512_storeu_ps(lanes, sum);
    volatile float keep = lanes[0];  // the sums used: the rounds not optimized away
    (void)keep;
  }
  return best;
}
#endif

// -1: set_bf16_kernel has not chosen; else a Bf16Kernel
std::atomic<int> g_kernel{-1};

}  // namespace

bool bf16_kernel_available(Bf16Kernel kernel) {
#if defined(__x86_64__)
  // both pack with the CPU's conversions
  if (kernel != Bf16Kernel::Emulated) {
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  }
#endif
  return kernel == Bf16Kernel::Emulated;
}

Bf16Kernel bf16_default_kernel() {
  static const Bf16Kernel chosen = [] {
#if defined(__x86_64__)
    // tile_native issues 24 vdpbf16ps a pair of steps where tile_fma issues 52 instructions on
    // the same ports, 48 of them multiply-adds
    if (bf16_kernel_available(Bf16Kernel::Native) &&
        rounds_seconds<true>() <= 2 * rounds_seconds<false>()) {
      return Bf16Kernel::Native;
    }
#endif
    return bf16_kernel_available(Bf16Kernel::Fma) ? Bf16Kernel::Fma : Bf16Kernel::Emulated;
  }();
  return chosen;
}

Bf16Kernel bf16_kernel() {
  const int k = g_kernel.load(std::memory_order_relaxed);
  return k < 0 ? bf16_default_kernel() : static_cast<Bf16Kernel>(k);
}

void set_bf16_kernel(Bf16Kernel kernel) {
  TG_CHECK(bf16_kernel_available(kernel),
           "set_bf16_kernel: this CPU has no AVX512_BF16; the {} kernel needs it",
           kernel == Bf16Kernel::Native ? "native" : "fma");
  g_kernel.store(static_cast<int>(kernel), std::memory_order_relaxed);
}

namespace {

#if defined(__x86_64__)
// What pairs_product runs for the kernel in use (native, fma): its packers, and its tile kernel on
// A's block, packed as pairs for tile_native (a_pairs) or as rounded floats for tile_fma
// (a_floats).
template <class S>
struct Bf16Plan {
  void (*tile_pairs)(int64_t, const uint32_t*, const uint32_t*, float*, int64_t, bool) = nullptr;
  void (*tile_floats)(int64_t, const float*, const uint32_t*, float*, int64_t, bool) = nullptr;
  void (*pack_b)(const float*, int64_t, int64_t, int64_t, int64_t, uint32_t*);
  bool rows_a;  // A in row-major panels (pack_rows), else pair-major (pack_steps_*)
  std::vector<uint32_t>& a_pairs;
  std::vector<float>& a_floats;

  Bf16Plan(bool ta, bool tb, std::vector<uint32_t>& pairs, std::vector<float>& floats)
      : pack_b(tb ? pack_lines_native : pack_steps_native<NR, float>),
        rows_a(!ta),
        a_pairs(pairs),
        a_floats(floats) {
    if (bf16_kernel() == Bf16Kernel::Native) {
      tile_pairs = rows_a ? tile_native<KP, 1> : tile_native<1, MR>;
      a_pairs.resize(static_cast<size_t>((MC + MR) * KP));
    } else {
      tile_floats = rows_a ? tile_fma<KP, 1> : tile_fma<1, MR>;
      a_floats.resize(static_cast<size_t>((MC + MR) * KC));
    }
  }

  // Lines [0, mc) and steps [0, kc) of op(A) from a (lda apart).
  void pack_a_block(const S* a, int64_t lda, int64_t mc, int64_t kc) {
    if (tile_floats && rows_a) {
      pack_rows<16, S, row_floats<S>>(a, lda, kc, mc, reinterpret_cast<uint32_t*>(a_floats.data()),
                                      KC);
    } else if (tile_floats) {
      pack_steps_fma(a, lda, mc, kc, a_floats.data());
    } else if (rows_a) {
      pack_rows<32, S, row_pairs>(a, lda, kc, mc, a_pairs.data(), KP);
    } else {
      pack_steps_native<MR>(a, 1, lda, mc, kc, a_pairs.data());
    }
  }

  // The tile of A's block from line ir, times the B panel b, into c (rows ldc apart); added to
  // c's values with add.
  void tile(int64_t ir, int64_t pairs, const uint32_t* b, float* c, int64_t ldc, bool add) const {
    const int64_t at = ir * (rows_a ? KP : pairs);
    if (tile_floats) {
      tile_floats(pairs, a_floats.data() + 2 * at, b, c, ldc, add);
    } else {
      tile_pairs(pairs, a_pairs.data() + at, b, c, ldc, add);
    }
  }
};

// bf16_gemm on the CPU's kernels, for A of floats or of bfloat16s (S).
template <class S>
void pairs_product(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const S* A, int64_t lda,
                   const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                   const Epilogue<float>& epilogue) {
  thread_local std::vector<uint32_t> a_pairs, b_pack;
  thread_local std::vector<float> a_floats;
  Bf16Plan<S> plan(ta, tb, a_pairs, a_floats);
  b_pack.resize(static_cast<size_t>((NC + NR) * KC / 2));
  float tile[MR * NR];
  if (K == 0) {  // no steps: C = beta C
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
    }
    epilogue.finish(C, ldc, 0, 0, M, N);
  }
  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kc = std::min(KC, K - pc), pairs = (kc + 1) / 2;
      const float block_beta = pc == 0 ? beta : 1;  // later k blocks add to the first's sum
      plan.pack_b(B + (tb ? jc * ldb + pc : pc * ldb + jc), tb ? ldb : 1, tb ? 1 : ldb, nc, kc,
                  b_pack.data());
      for (int64_t ic = 0; ic < M; ic += MC) {
        const int64_t mc = std::min(MC, M - ic);
        plan.pack_a_block(A + (ta ? pc * lda + ic : ic * lda + pc), lda, mc, kc);
        for (int64_t jr = 0; jr < nc; jr += NR) {
          for (int64_t ir = 0; ir < mc; ir += MR) {
            const int64_t m = std::min(MR, mc - ir), n = std::min(NR, nc - jr);
            float* corner = C + (ic + ir) * ldc + jc + jr;
            // A whole tile goes straight into C from the kernel's registers, replacing C or, for
            // a later k block, added to it; a ragged one, or one scaled by a beta other than 0 and
            // 1, through `tile` and the loop below.
            const bool add = block_beta == 1;
            const bool direct = m == MR && n == NR && (block_beta == 0 || add);
            // C's lines asked for before the sums, as gemm.cpp's kernel does: they arrive while
            // the sums run, where a later k block would wait on C's reads after them
            for (int64_t i = 0; i < m; ++i) {
              __builtin_prefetch(corner + i * ldc, 1, 3);
              if (n > 16) __builtin_prefetch(corner + i * ldc + 16, 1, 3);
            }
            plan.tile(ir, pairs, b_pack.data() + jr * pairs, direct ? corner : tile,
                      direct ? ldc : NR, direct && add);
            for (int64_t i = 0; i < m; ++i) {
              float* c = corner + i * ldc;
              for (int64_t j = 0; j < n && !direct; ++j) {
                c[j] = block_beta == 0 ? tile[i * NR + j] : block_beta * c[j] + tile[i * NR + j];
              }
            }
            if (pc + kc == K && !epilogue.empty()) {
              epilogue.finish(corner, ldc, ic + ir, jc + jr, m, n);
            }
          }
        }
      }
    }
  }
}
#endif

// bf16_gemm for A of floats or of bfloat16s (S).
template <class S>
void bf16_product(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const S* A, int64_t lda,
                  const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                  const Epilogue<float>& epilogue) {
#if defined(__x86_64__)
  if (bf16_kernel() != Bf16Kernel::Emulated) {
    pairs_product(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, epilogue);
    return;
  }
#endif
  rounded_sgemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, epilogue);
}

}  // namespace

void bf16_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
               const Epilogue<float>& epilogue) {
  bf16_product(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, epilogue);
}

void bf16_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
               const Epilogue<float>& epilogue) {
  bf16_product(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, epilogue);
}

}  // namespace tapegrad
