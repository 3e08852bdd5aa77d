// The packed matrix product of Goto and van de Geijn ("Anatomy of High-Performance Matrix
// Multiplication", 2008), as BLIS lays it out:
//
//   for each block of NC columns of C
//     for each block of KC steps of k:   pack op(B)[k block, column block] into panels of NR cols
//       for each block of MC rows:        pack op(A)[row block, k block] into panels of MR rows
//                                          (a row-major A is read in place: no copy)
//         for each NR-wide B panel, for each MR-high A panel:
//           micro-kernel: the MR x NR tile of C += A panel . B panel
//
// The micro-kernel keeps its whole tile in vector registers and, per step of k, loads one row
// of the B panel (NR floats), broadcasts the MR values of the A panel's column and does MR x NR
// multiply-adds: the tile never leaves the registers until k is done. Packing lays the panels
// out in the order the kernel reads them, whatever op(A) and op(B) are, so transposes cost
// nothing beyond the copy, and pads the ragged edges with zeros so the kernel has one shape.
// A row-major A needs no packing: each of the tile's MR rows is read in k order straight from
// A (MR sequential streams), which on the small model's [192, 64] row blocks halved the time,
// as packing A cost more than the arithmetic.
// The block sizes keep a B panel in L1 and the packed A block in L2 while they are reused.
#include "autograd/gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace tapegrad {

namespace {

// The register tile, by the vector width the compiler targets: MR x 2 vectors of accumulators
// plus two B vectors and a broadcast must fit the register file (32 registers with AVX-512,
// 16 otherwise).
#if defined(__AVX512F__)
constexpr int64_t kLanes = 16, MR = 12;
#elif defined(__AVX__)
constexpr int64_t kLanes = 8, MR = 6;
#else
constexpr int64_t kLanes = 4, MR = 4;
#endif
constexpr int64_t NR = 2 * kLanes;
constexpr int64_t KC = 256, MC = MR * 12, NC = NR * 64;

typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

// c (m, n) = op(A) tile (MR, kc) . bp (kc, NR) + beta c, for the first m <= MR rows and n <= NR
// columns of the tile. Row i of the A tile holds a[i * a_row + k * a_k]: a packed panel
// (a_row = 1, a_k = MR) or, when A is row-major, A itself (a_row = lda, a_k = 1), which saves
// packing it; rows past m then repeat row m - 1 and their sums are dropped. bp holds NR values
// of op(B) per k, b_k apart: a packed panel (b_k = NR) or a row-major B itself (b_k = ldb). beta ==
// 0 never reads c (it may be uninitialised).
void micro_kernel(int64_t kc, const float* a, int64_t a_row, int64_t a_k, const float* bp,
                  int64_t b_k, float beta, float* c, int64_t ldc, int64_t m, int64_t n) {
  const float* rows[MR];
  for (int64_t i = 0; i < MR; ++i) rows[i] = a + std::min(i, m - 1) * a_row;
  Vec acc[MR][2] = {};
  for (int64_t k = 0; k < kc; ++k, bp += b_k) {
    const Vec b0 = load(bp), b1 = load(bp + kLanes);
#pragma GCC unroll 16
    for (int64_t i = 0; i < MR; ++i) {
      const Vec ai = Vec{} + rows[i][k * a_k];  // A[i, k] in every lane
      acc[i][0] += ai * b0;
      acc[i][1] += ai * b1;
    }
  }
  if (m == MR && n == NR) {
#pragma GCC unroll 16
    for (int64_t i = 0; i < MR; ++i) {
      for (int64_t h = 0; h < 2; ++h) {
        float* p = c + i * ldc + h * kLanes;
        store(p, beta == 0 ? acc[i][h] : beta * load(p) + acc[i][h]);
      }
    }
    return;
  }
  float tile[MR][NR];
  for (int64_t i = 0; i < MR; ++i) {
    store(tile[i], acc[i][0]);
    store(tile[i] + kLanes, acc[i][1]);
  }
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) row[j] = beta == 0 ? tile[i][j] : beta * row[j] + tile[i][j];
  }
}

// Rows [0, m) and steps [0, kc) of op(A) = A^T, read from a (A stored (K, M), offset to the
// block's corner), into panels of MR rows, each kc x MR in k-major order: row k of a panel is
// MR consecutive floats of A. Rows past m are zeros.
void pack_a(const float* a, int64_t lda, int64_t m, int64_t kc, float* ap) {
  for (int64_t i0 = 0; i0 < m; i0 += MR) {
    const int64_t rows = std::min(MR, m - i0);
    for (int64_t k = 0; k < kc; ++k, ap += MR) {
      const float* src = a + k * lda + i0;
      for (int64_t i = 0; i < rows; ++i) ap[i] = src[i];
      for (int64_t i = rows; i < MR; ++i) ap[i] = 0;
    }
  }
}

// Whether panel j0 of op(B) is read in place: a row-major B whose panel is NR columns wide.
bool b_in_place(bool tb, int64_t j0, int64_t n) { return !tb && n - j0 >= NR; }

// Steps [0, kc) and columns [0, n) of op(B), read from b (offset to the block's corner), into
// panels of NR columns, each kc x NR in k-major order at bp + j0 * kc; columns past n are zeros.
// Panels read in place are skipped.
void pack_b(bool tb, const float* b, int64_t ldb, int64_t kc, int64_t n, float* bp) {
  const int64_t k_step = tb ? 1 : ldb, col_step = tb ? ldb : 1;
  for (int64_t j0 = 0; j0 < n; j0 += NR) {
    if (b_in_place(tb, j0, n)) continue;
    const int64_t cols = std::min(NR, n - j0);
    const float* panel = b + j0 * col_step;
    float* out = bp + j0 * kc;
    for (int64_t k = 0; k < kc; ++k, out += NR) {
      for (int64_t j = 0; j < cols; ++j) out[j] = panel[k * k_step + j * col_step];
      for (int64_t j = cols; j < NR; ++j) out[j] = 0;
    }
  }
}

// Each thread packs into its own buffers, made once at the largest block size.
struct Packs {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  static float* make(int64_t floats) {
    void* p = std::aligned_alloc(64, static_cast<size_t>(floats) * sizeof(float));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<float*>(p);
  }
  std::unique_ptr<float, Free> a{make(MC * KC)}, b{make(KC * NC)};
};

}  // namespace

void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (K == 0) {  // C = beta C
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
    }
    return;
  }
  thread_local Packs packs;
  float* ap = packs.a.get();
  float* bp = packs.b.get();
  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kc = std::min(KC, K - pc);
      const float block_beta = pc == 0 ? beta : 1;  // later k blocks add to the first's sum
      const float* b = B + (tb ? jc * ldb + pc : pc * ldb + jc);
      pack_b(tb, b, ldb, kc, nc, bp);
      for (int64_t ic = 0; ic < M; ic += MC) {
        const int64_t mc = std::min(MC, M - ic);
        // A row-major is read in place; a transposed A is packed into row panels.
        const float* a = A + (ta ? pc * lda + ic : ic * lda + pc);
        if (ta) pack_a(a, lda, mc, kc, ap);
        for (int64_t jr = 0; jr < nc; jr += NR) {
          const bool in_place = b_in_place(tb, jr, nc);
          const float* panel = in_place ? b + jr : bp + jr * kc;
          for (int64_t ir = 0; ir < mc; ir += MR) {
            const float* tile = ta ? ap + ir * kc : a + ir * lda;
            micro_kernel(kc, tile, ta ? 1 : lda, ta ? MR : 1, panel, in_place ? ldb : NR,
                         block_beta, C + (ic + ir) * ldc + jc + jr, ldc, std::min(MR, mc - ir),
                         std::min(NR, nc - jr));
          }
        }
      }
    }
  }
}

}  // namespace tapegrad
