// The bfloat16 product (gemm_bf16.h) in sgemm's loop nest (gemm.cpp): blocks of NC columns,
// KC steps and MC rows, the operands packed into panels of MR rows and NR columns, and a
// register tile of MR x NR float32 sums. What differs is the packing: it rounds each value to
// bfloat16 and lays two steps of k side by side in 32 bits (k's in the low half, k + 1's in
// the high), the pair vdpbf16ps multiplies with the same pair of the other operand and adds
// to one float32 lane. An A pair is broadcast to all lanes; a B panel holds NR pairs a step.
// K is padded to even with zeros.
#include "tapegrad/autograd/fast/gemm_bf16.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "tapegrad/autograd/error.h"

namespace tapegrad {

namespace {

constexpr int64_t MR = 12, NR = 32;  // NR: two vectors of 16 float32 lanes
constexpr int64_t KC = 512, MC = MR * 12, NC = NR * 64;

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// Values of op(A) (element (i, k)) and of op(B) (element (k, j)) as bfloat16 pairs: panels
// of W lines (rows of op(A), columns of op(B)) over `pairs` pairs of steps from k0, each
// panel pair-major: out[panel][p][r] = (line r at k0 + 2p, at k0 + 2p + 1); past a line's
// count or K, zeros.
template <int64_t W, class At>
void pack_pairs(At at, int64_t lines, int64_t k0, int64_t K, int64_t pairs, uint32_t* out) {
  for (int64_t l0 = 0; l0 < lines; l0 += W) {
    uint32_t* panel = out + l0 * pairs;
    for (int64_t p = 0; p < pairs; ++p) {
      const int64_t k = k0 + 2 * p;
      for (int64_t r = 0; r < W; ++r) {
        const int64_t l = l0 + r;
        const uint32_t lo = l < lines ? to_bf16(at(l, k)) : 0;
        const uint32_t hi = l < lines && k + 1 < K ? to_bf16(at(l, k + 1)) : 0;
        panel[p * W + r] = lo | hi << 16;
      }
    }
  }
}

// tile (MR x NR) = the sums over `pairs` of the A panel's pairs (MR a pair) times the B
// panel's (NR a pair): per pair, the high halves' product added, then the low halves'.
void tile_emulated(int64_t pairs, const uint32_t* a, const uint32_t* b, float* tile) {
  std::fill(tile, tile + MR * NR, 0.0f);
  for (int64_t p = 0; p < pairs; ++p, a += MR, b += NR) {
    for (int64_t i = 0; i < MR; ++i) {
      const float a_lo = from_bf16(static_cast<uint16_t>(a[i]));
      const float a_hi = from_bf16(static_cast<uint16_t>(a[i] >> 16));
      float* row = tile + i * NR;
      for (int64_t j = 0; j < NR; ++j) {
        // each product is exact in float32, so a separate add rounds as vdpbf16ps does
        row[j] += a_hi * from_bf16(static_cast<uint16_t>(b[j] >> 16));
        row[j] += a_lo * from_bf16(static_cast<uint16_t>(b[j]));
      }
    }
  }
}

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bf16"))) void tile_native(int64_t pairs, const uint32_t* a,
                                                               const uint32_t* b, float* tile) {
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int64_t i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p, a += MR, b += NR) {
    const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 16);
#pragma GCC unroll 12
    for (int64_t i = 0; i < MR; ++i) {
      const __m512i ai = _mm512_set1_epi32(static_cast<int>(a[i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], (__m512bh)ai, (__m512bh)b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], (__m512bh)ai, (__m512bh)b1);
    }
  }
#pragma GCC unroll 12
  for (int64_t i = 0; i < MR; ++i) {
    _mm512_storeu_ps(tile + i * NR, acc[i][0]);
    _mm512_storeu_ps(tile + i * NR + 16, acc[i][1]);
  }
}
#endif

// -1: not chosen yet; else a Bf16Kernel
std::atomic<int> g_kernel{-1};

}  // namespace

uint16_t to_bf16(float x) {
  const uint32_t u = bits(x);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>(u >> 16 | 0x40);  // NaN
  // to nearest: add half a unit of the kept bits, less one unless the kept part is odd (ties
  // to even); a carry runs on into the exponent, and past the largest to infinity
  return static_cast<uint16_t>((u + 0x7fff + (u >> 16 & 1)) >> 16);
}

float from_bf16(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

bool bf16_native_available() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

Bf16Kernel bf16_kernel() {
  int k = g_kernel.load(std::memory_order_relaxed);
  if (k < 0) {
    k = static_cast<int>(bf16_native_available() ? Bf16Kernel::Native : Bf16Kernel::Emulated);
    g_kernel.store(k, std::memory_order_relaxed);
  }
  return static_cast<Bf16Kernel>(k);
}

void set_bf16_kernel(Bf16Kernel kernel) {
  TG_CHECK(kernel == Bf16Kernel::Emulated || bf16_native_available(),
           "set_bf16_kernel: this CPU has no AVX512_BF16; only the emulated kernel runs here");
  g_kernel.store(static_cast<int>(kernel), std::memory_order_relaxed);
}

void bf16_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  auto tile_kernel = tile_emulated;
#if defined(__x86_64__)
  if (bf16_kernel() == Bf16Kernel::Native) tile_kernel = tile_native;
#endif
  const auto a_at = [&](int64_t i, int64_t k) { return ta ? A[k * lda + i] : A[i * lda + k]; };
  const auto b_at = [&](int64_t j, int64_t k) { return tb ? B[j * ldb + k] : B[k * ldb + j]; };
  thread_local std::vector<uint32_t> a_pack, b_pack;
  a_pack.resize(static_cast<size_t>((MC + MR) * KC / 2));
  b_pack.resize(static_cast<size_t>((NC + NR) * KC / 2));
  float tile[MR * NR];
  for (int64_t i = 0; i < M && K == 0; ++i) {  // no steps: C = beta C
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
  }
  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kc = std::min(KC, K - pc), pairs = (kc + 1) / 2;
      const float block_beta = pc == 0 ? beta : 1;  // later k blocks add to the first's sum
      pack_pairs<NR>([&](int64_t j, int64_t k) { return b_at(jc + j, k); }, nc, pc, K, pairs,
                     b_pack.data());
      for (int64_t ic = 0; ic < M; ic += MC) {
        const int64_t mc = std::min(MC, M - ic);
        pack_pairs<MR>([&](int64_t i, int64_t k) { return a_at(ic + i, k); }, mc, pc, K, pairs,
                       a_pack.data());
        for (int64_t jr = 0; jr < nc; jr += NR) {
          for (int64_t ir = 0; ir < mc; ir += MR) {
            tile_kernel(pairs, a_pack.data() + ir * pairs, b_pack.data() + jr * pairs, tile);
            const int64_t m = std::min(MR, mc - ir), n = std::min(NR, nc - jr);
            for (int64_t i = 0; i < m; ++i) {
              float* c = C + (ic + ir + i) * ldc + jc + jr;
              for (int64_t j = 0; j < n; ++j) {
                c[j] = block_beta == 0 ? tile[i * NR + j] : block_beta * c[j] + tile[i * NR + j];
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace tapegrad
