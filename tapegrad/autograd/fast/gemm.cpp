// The packed matrix product of Goto and van de Geijn ("Anatomy of High-Performance Matrix
// Multiplication", 2008), as BLIS lays it out:
//
//   for each block of NC columns of C
//     for each block of KC steps of k:   pack op(B)[k block, column block] into panels of NR cols
//       for each block of MC rows:        pack op(A)[row block, k block] into panels of MR rows
//                                          (either may be read in place instead: see below)
//         for each NR-wide B panel, for each MR-high A panel:
//           micro-kernel: the MR x NR tile of C += A panel . B panel
//
// The micro-kernel keeps its whole tile in vector registers and, per step of k, loads one row
// of the B panel (NR floats), broadcasts the MR values of the A panel's column and does MR x NR
// multiply-adds: the tile never leaves the registers until k is done. Packing lays the panels
// out in the order the kernel reads them, whatever op(A) and op(B) are, so transposes cost
// nothing beyond the copy, and pads the ragged edges with zeros so the kernel has one shape.
// Packing pays only when a packed value is read many times: each A panel is read once per B
// panel, each B panel once per A panel. So a row-major operand that would be read by few
// panels of the other is read in place instead (A as MR row streams, B row by row): on the
// small model's [192, 64] row blocks packing cost more than the arithmetic.
// The block sizes keep the packed A block in L2 and the B block in L3 while they are reused;
// a deep KC makes each tile's pass over C (loading and storing it) rare.
#include "tapegrad/autograd/fast/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "tapegrad/autograd/fast/gemm_bf16.h"
#include "tapegrad/autograd/fast/transpose16.h"

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
constexpr int64_t KC = 512, MC = MR * 12, NC = NR * 64;
// A row-major operand is packed when the product's other dimension (N for A, M for B) is at
// least this long: each packed value is then read that many times over.
constexpr int64_t kPackFrom = 512;

typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

// An operand's values as a product reads them: floats as they are or (kRound) rounded to
// bfloat16 (bf16_gemm's operands), bfloat16s widened; one, or a vector's worth.
template <bool kRound>
float value(float x) {
  return kRound ? round_to_bf16(x) : x;
}
template <bool kRound>
float value(uint16_t h) {
  return from_bf16(h);
}
template <bool kRound>
Vec load_values(const float* p) {
  return kRound ? rounded_lanes(load(p)) : load(p);
}
template <bool kRound>
Vec load_values(const uint16_t* p) {
  typedef uint16_t Halves __attribute__((vector_size(kLanes * sizeof(uint16_t))));
  typedef uint32_t Bits __attribute__((vector_size(sizeof(Vec))));
  Halves h;
  std::memcpy(&h, p, sizeof h);
  return std::bit_cast<Vec>(__builtin_convertvector(h, Bits) << 16);
}

// The epilogue of a tile of C, at (row, col) from C's corner: applied to the tile's m rows of n
// once they are final, that is after the last block of k (`last`), else nothing. The kernel
// adds the bias and applies the relu as it stores (a call a row for the bias costs as much as a
// fifth of a K = 64 product); rows() runs the rest.
struct Finish {
  const Epilogue<float>* epilogue;
  bool last;
  int64_t row, col;
  // the tile's columns of the bias, or null: none, or not the last block of k
  const float* bias() const { return last && epilogue->bias ? epilogue->bias + col : nullptr; }
  bool relu() const { return last && epilogue->relu; }
  void rows(float* c, int64_t ldc, int64_t m, int64_t n) const {
    if (last && epilogue->fn) epilogue->fn(epilogue->ctx, c, ldc, row, col, m, n);
  }
};

// The epilogue over the whole of C (M, N), for the paths that finish C all at once (a small
// product, whose C is in cache anyway; float64).
template <class T>
void finish_all(const Epilogue<T>& epilogue, T* C, int64_t ldc, int64_t M, int64_t N) {
  if (!epilogue.empty()) epilogue.finish(C, ldc, 0, 0, M, N);
}

// c (m, n) = op(A) tile (MR, kc) . bp (kc, NR) + beta c, for the first m <= kRows rows and
// n <= NR columns of the tile, kVecs of its two vectors of columns computed: a ragged last panel
// no wider than one vector (N = 200 is six panels of 32 and one of 8) takes half the work, and
// so does a ragged last tile of rows its kRows (a third or two of MR: M = 64 is five tiles of 12
// and one of 4). The A tile is k-major (kKMajorA: its values of step k consecutive at a + k lda,
// so every read is one base register plus a constant: a packed panel, lda = MR, or a transposed
// A read in place, lda its row stride) or a row-major A itself, rows lda apart; rows past m then
// repeat row m - 1 and their sums are dropped. bp holds NR values of op(B) per k, b_k
// apart: a packed panel (b_k = NR) or a row-major B itself (b_k = ldb). beta == 0 never reads c (it
// may be uninitialised). kPairs takes the steps in pairs, k + 1 before k (bf16_gemm's order).
template <bool kKMajorA, int64_t kVecs, int64_t kRows, bool kPairs = false>
void micro_kernel(int64_t kc, const float* a, int64_t lda, const float* bp, int64_t b_k, float beta,
                  float* c, int64_t ldc, int64_t m, int64_t n, const Finish& finish) {
  const float* rows[kRows];
  if constexpr (!kKMajorA) {
    for (int64_t i = 0; i < kRows; ++i) rows[i] = a + std::min(i, m - 1) * lda;
  }
  // The C tile's lines are asked for first, to be written: they arrive while the k loop
  // runs, where C, past the caches in a large product, would stall the stores at the end (a
  // deep K passes over it K / KC times).
  for (int64_t i = 0; i < m; ++i) {
    __builtin_prefetch(c + i * ldc, 1, 3);
    if constexpr (kVecs == 2) __builtin_prefetch(c + i * ldc + kLanes, 1, 3);
  }
  Vec acc[kRows][kVecs] = {};
  const auto step = [&](int64_t k) {
    const Vec b0 = load(bp + k * b_k), b1 = kVecs == 2 ? load(bp + k * b_k + kLanes) : Vec{};
#pragma GCC unroll 16
    for (int64_t i = 0; i < kRows; ++i) {
      // A scalar times a vector broadcasts straight from memory; `Vec{} + x` cost a scalar add
      // and a register broadcast per value, on the pipes the multiply-adds need.
      float ai;
      if constexpr (kKMajorA) {
        ai = a[k * lda + i];
      } else {
        ai = rows[i][k];
      }
      acc[i][0] += ai * b0;
      if constexpr (kVecs == 2) acc[i][kVecs - 1] += ai * b1;
    }
  };
  // in pairs, one step an iteration (k ^ 1), so B's vectors and the accumulators stay in
  // registers: a pair's two steps in one body, interleaved, need more than AVX2's 16
  const int64_t paired = kPairs ? kc / 2 * 2 : 0;
  for (int64_t k = 0; k < kc; ++k) step(k < paired ? k ^ 1 : k);
  const float* bias = finish.bias();
  const bool relu = finish.relu();
  if (kVecs == 2 && m == kRows && n == NR) {
    Vec bias_v[kVecs] = {};
    for (int64_t h = 0; h < kVecs && bias; ++h) bias_v[h] = load(bias + h * kLanes);
#pragma GCC unroll 16
    for (int64_t i = 0; i < kRows; ++i) {
      for (int64_t h = 0; h < kVecs; ++h) {
        float* p = c + i * ldc + h * kLanes;
        Vec sum = beta == 0 ? acc[i][h] : beta * load(p) + acc[i][h];
        if (bias) sum += bias_v[h];
        store(p, relu ? (sum > 0 ? sum : Vec{}) : sum);
      }
    }
    finish.rows(c, ldc, m, n);
    return;
  }
  float tile[kRows][NR];
  // unrolled, so acc is indexed by constants only: a loop indexing it at run time keeps it in
  // memory, zeroed by a memset call and spilled on every call of the kernel
#pragma GCC unroll 16
  for (int64_t i = 0; i < kRows; ++i) {
    store(tile[i], acc[i][0]);
    if constexpr (kVecs == 2) store(tile[i] + kLanes, acc[i][kVecs - 1]);
  }
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) row[j] = beta == 0 ? tile[i][j] : beta * row[j] + tile[i][j];
    bias_relu(row, n, bias, relu);
  }
  finish.rows(c, ldc, m, n);
}

// The micro-kernel for a tile of m rows and n columns: one vector of columns for a panel no
// wider (a narrow ragged one), and the fewest rows of a third of MR, two thirds or MR that hold m.
constexpr int64_t kThird = MR % 3 == 0 ? MR / 3 : MR;

template <bool kKMajorA, bool kPairs = false>
auto kernel_for(int64_t m, int64_t n) {
  const auto rows = [m](auto kernel_of) {
    if (m <= kThird) return kernel_of(std::integral_constant<int64_t, kThird>{});
    if (m <= 2 * kThird)
      return kernel_of(std::integral_constant<int64_t, std::min(2 * kThird, MR)>{});
    return kernel_of(std::integral_constant<int64_t, MR>{});
  };
  if (n > kLanes)
    return rows([](auto r) { return &micro_kernel<kKMajorA, 2, decltype(r)::value, kPairs>; });
  return rows([](auto r) { return &micro_kernel<kKMajorA, 1, decltype(r)::value, kPairs>; });
}

// Lines [0, count) and steps [0, kc) of an operand into panels of W lines, each kc x W in
// k-major order: panel p holds out[p * W * kc + k * W + r] = line p * W + r at step k, which is
// src[line * l_step + k * k_step]; lines past count are zeros. A line is a row of op(A) or a
// column of op(B). One of the two strides is 1, and the loops read along it, in memory order,
// writing the panels with a stride (a transposed A packed panel by panel would walk all kc of
// its rows once per panel). Steps of consecutive lines (a transposed A, a plain B) go 4 at a
// time, every panel's part of them before the next 4, the next 4 rows fetched meanwhile: a
// step at a time would write a piece of a line in each panel, panels a multiple of 4 KiB apart
// that share one set of L1, and each piece's line would leave L1 before the next step filled it.
// Lines along k (a row-major A, a transposed B) go a vector's lanes of lines by as many steps at
// a time through a transpose in registers, which packs faster than element by element.
// The values are packed as the product reads them (value: kRound rounds them, S = uint16_t
// widens).
template <int64_t W, bool kRound = false, class S = float>
void pack_panels(const S* src, int64_t l_step, int64_t k_step, int64_t count, int64_t kc,
                 float* out) {
  const int64_t full = count / W * W;
  if (l_step == 1) {  // a step is `count` consecutive floats
    constexpr int64_t G = 4;
    for (int64_t k0 = 0; k0 < kc; k0 += G) {
      const int64_t k1 = std::min(kc, k0 + G);
      prefetch_steps(src, k_step, k1, std::min(kc, k1 + G), count);
      for (int64_t l0 = 0; l0 < full; l0 += W) {
        for (int64_t k = k0; k < k1; ++k) {
          for (int64_t r = 0; r < W; ++r)
            out[l0 * kc + k * W + r] = value<kRound>(src[k * k_step + l0 + r]);
        }
      }
    }
  } else {  // a line is kc consecutive floats: each gives a vector at a time
    for (int64_t l0 = 0; l0 < full; l0 += W) {
      float* panel = out + l0 * kc;
      int64_t k0 = 0;
      for (; k0 + kLanes <= kc; k0 += kLanes) {
        // kLanes lines' kLanes steps at a time, transposed in registers
        for (int64_t r0 = 0; r0 < W; r0 += kLanes) {
          const int64_t lines = std::min<int64_t>(kLanes, W - r0);
          Vec block[kLanes] = {};
          for (int64_t r = 0; r < lines; ++r) {
            block[r] = load_values<kRound>(src + (l0 + r0 + r) * l_step + k0);
          }
          detail::transpose(block);
          for (int64_t k = 0; k < kLanes; ++k) {
            std::memcpy(panel + (k0 + k) * W + r0, &block[k], sizeof(float) * lines);
          }
        }
      }
      for (int64_t r = 0; r < W; ++r) {
        for (int64_t k = k0; k < kc; ++k)
          panel[k * W + r] = value<kRound>(src[(l0 + r) * l_step + k]);
      }
    }
  }
  if (full == count) return;
  float* panel = out + full * kc;
  for (int64_t k = 0; k < kc; ++k) {
    for (int64_t r = 0; r < W; ++r) {
      panel[k * W + r] =
          full + r < count ? value<kRound>(src[(full + r) * l_step + k * k_step]) : 0;
    }
  }
}

// Rows [0, m) and steps [0, kc) of op(A), read from a (offset to the block's corner), into
// panels of MR rows at ap.
template <bool kRound = false, class S = float>
void pack_a(bool ta, const S* a, int64_t lda, int64_t m, int64_t kc, float* ap) {
  pack_panels<MR, kRound>(a, ta ? 1 : lda, ta ? lda : 1, m, kc, ap);
}

// Whether panel j0 of op(B) is read in place: B is read in place (`direct`) and the panel is
// NR columns wide.
bool b_in_place(bool direct, int64_t j0, int64_t n) { return direct && n - j0 >= NR; }

// Steps [0, kc) and columns [0, n) of op(B), read from b (offset to the block's corner), into
// panels of NR columns, panel j0 / NR at bp + j0 * kc. Panels read in place are skipped: a
// direct B packs only its ragged last panel.
template <bool kRound = false>
void pack_b(bool tb, bool direct, const float* b, int64_t ldb, int64_t kc, int64_t n, float* bp) {
  const int64_t col_step = tb ? ldb : 1, k_step = tb ? 1 : ldb;
  const int64_t skip = direct ? n / NR * NR : 0;
  pack_panels<NR, kRound>(b + skip * col_step, col_step, k_step, n - skip, kc, bp + skip * kc);
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

// Products this small (attention heads of a small model: 12x12x8) cost more in a packed
// kernel's setup (or a BLAS call's) than in arithmetic; so do products of a few rows (one
// query of each head in decoding, 1 x S x D) when B is small, or read in place.
constexpr int64_t kSmallFlops = 1 << 15, kSmallN = 64, kSmallPack = 4096;
constexpr int64_t kFewRows = 4, kFewPack = 1 << 14, kSmallW = 8;

}  // namespace

bool small_product(bool tb, int64_t M, int64_t N, int64_t K) {
  // K within one k block, so every element sums as sgemm's would (a split stays bit-exact)
  if (K > KC) return false;
  if (M * N * K <= kSmallFlops && N <= kSmallN && N * K <= kSmallPack) return true;
  return M <= kFewRows && ((!tb && N % kSmallW == 0) || N * K <= kFewPack);
}

namespace {

// Rows [0, R) of a small_gemm row block: C rows += a rows . bp, `rows` of them real (the rest
// repeat the last; their sums are dropped). R accumulators, one per row, W columns at a time.
template <int64_t R, int64_t W, class T>
void small_rows(int64_t rows, const T* const* a, int64_t a_col, const T* bp, int64_t b_step,
                int64_t N, int64_t K, T beta, T* C, int64_t ldc) {
  typedef T Vec __attribute__((vector_size(W * sizeof(T))));
  for (int64_t j0 = 0; j0 < N; j0 += W) {
    Vec acc[R] = {};
    for (int64_t k = 0; k < K; ++k) {
      Vec b;
      std::memcpy(&b, bp + k * b_step + j0, sizeof b);
#pragma GCC unroll 16
      for (int64_t r = 0; r < R; ++r) acc[r] += a[r][k * a_col] * b;
    }
    const int64_t width = std::min(W, N - j0);
    for (int64_t r = 0; r < rows; ++r) {
      T* c = C + r * ldc + j0;
      if (width == W) {
        Vec old{};
        if (beta != T{0}) std::memcpy(&old, c, sizeof old);
        const Vec sum = beta == T{0} ? acc[r] : beta * old + acc[r];
        std::memcpy(c, &sum, sizeof sum);
      } else {
        for (int64_t j = 0; j < width; ++j)
          c[j] = beta == T{0} ? acc[r][j] : beta * c[j] + acc[r][j];
      }
    }
  }
}

// C (M,N) = op(A) (M,K) @ op(B) (K,N) + beta C, for small_product shapes. C is built R rows by W
// columns at a time, acc[r] += A[i0 + r, k] * B[k, j0:j0+W], in R vector registers: the R rows
// are R independent chains of multiply-adds (one row at a time, with K = 8 or 12, would wait on
// the latency of each add); a last block of 4 or fewer rows takes 4 or 1 accumulators, so a single
// row does not pay for twelve. op(B) is read in W-wide row pieces: straight from B when it is
// stored row-major in whole vectors (N a multiple of W: attention's D = 8 columns), else from a
// copy whose rows are padded with zeros to a multiple of W. Whole vectors of C are stored as
// such. Where vectors are 16 wide and the padded rows are whole 16s (a transposed attention
// tile's 16 queries), 12-row blocks take 16 columns at a time: half the multiply-adds.
template <class T>
void small_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda,
                const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  constexpr int64_t W = kSmallW, R = MR;  // as many rows as the packed kernel's tile
  const int64_t NP = (N + W - 1) / W * W;
  thread_local std::vector<T> packed;
  const bool in_place = !tb && N == NP;
  const T* bp = B;
  const int64_t b_step = in_place ? ldb : NP;
  if (!in_place) {
    packed.resize(static_cast<size_t>(K * NP));
    const int64_t b_row = tb ? 1 : ldb, b_col = tb ? ldb : 1;
    for (int64_t k = 0; k < K; ++k) {
      T* row = packed.data() + k * NP;
      for (int64_t j = 0; j < N; ++j) row[j] = B[k * b_row + j * b_col];
      for (int64_t j = N; j < NP; ++j) row[j] = 0;
    }
    bp = packed.data();
  }
  const int64_t a_row = ta ? 1 : lda, a_col = ta ? lda : 1;
  constexpr bool kWide = std::is_same_v<T, float> && kLanes == 2 * W;
  for (int64_t i0 = 0; i0 < M; i0 += R) {
    const int64_t rows = std::min(R, M - i0);
    const T* a[R];
    for (int64_t r = 0; r < R; ++r) a[r] = A + (i0 + std::min(r, rows - 1)) * a_row;
    T* c = C + i0 * ldc;
    if constexpr (kWide) {
      if (rows > 4 && NP % (2 * W) == 0) {
        small_rows<R, 2 * W>(rows, a, a_col, bp, b_step, N, K, beta, c, ldc);
        continue;
      }
    }
    if (rows > 4) {
      small_rows<R, W>(rows, a, a_col, bp, b_step, N, K, beta, c, ldc);
    } else if (rows > 1) {
      small_rows<4, W>(rows, a, a_col, bp, b_step, N, K, beta, c, ldc);
    } else {
      small_rows<1, W>(rows, a, a_col, bp, b_step, N, K, beta, c, ldc);
    }
  }
}

// How packed_product reads its operands: as they are (sgemm); rounded to bfloat16 as it packs
// them, every operand packed (rounded_sgemm); or as they are, holding bfloat16 values already
// (gemm_rounded). Both of the last take the kernel's steps in pairs (bf16_gemm's order).
enum class Reads { AsTheyAre, Rounding, Rounded };

template <Reads kReads, class S>
void packed_product(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const S* A, int64_t lda,
                    const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                    const Epilogue<float>& epilogue);

// A few rows times a transposed B, x W^T with W stored [N, K]: a linear layer in decoding,
// one row per hypothesis. Packing W would copy every weight to use it M times, which for
// M = 32 took longer than the arithmetic. So the product is turned over, C^T = W x^T: W is the
// row-major A operand, read in place, x^T the small packed B, and C^T goes through a buffer.
// Every element sums the same products in the same k blocks as the direct path (beta applied
// in the first block), so a split into shares still gives the same bits. Decoding the base
// model (bench decode-base-128, two threads): see the README's decode table. Read as kReads says.
constexpr int64_t kSwapRows = NR * 2;

template <Reads kReads>
void swapped(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
             int64_t ldb, float beta, float* C, int64_t ldc, const Epilogue<float>& epilogue) {
  thread_local std::vector<float> turned;
  turned.resize(static_cast<size_t>(N * M));
  float* t = turned.data();
  if (beta != 0) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) t[j * M + i] = C[i * ldc + j];
    }
  }
  packed_product<kReads>(false, true, N, M, K, B, ldb, A, lda, beta, t, M, {});
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = t[j * M + i];
  }
  finish_all(epilogue, C, ldc, M, N);
}

// The loop nest of sgemm, rounded_sgemm and gemm_rounded, reading the operands as kReads says.
template <Reads kReads, class S>
void packed_product(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const S* A, int64_t lda,
                    const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                    const Epilogue<float>& epilogue) {
  if (K == 0) {  // C = beta C
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
    }
    finish_all(epilogue, C, ldc, M, N);
    return;
  }
  constexpr bool kRound = kReads == Reads::Rounding, kPairs = kReads != Reads::AsTheyAre;
  if constexpr (!kRound) {
    if (tb && !ta && M <= kSwapRows && N > kSwapRows) {
      swapped<kReads>(M, N, K, A, lda, B, ldb, beta, C, ldc, epilogue);
      return;
    }
  }
  // A is packed where each packed value would be read by many B panels; else read in place, a
  // plain A as MR row streams, a transposed one k-major (the MR values of a step lie together in
  // a row of it), but for a ragged tile whose kernel would read rows past its m (m not a whole
  // number of kThird rows): that one is packed alone.
  const bool packed_a = kRound || N >= kPackFrom;
  const bool direct_b = !kRound && !tb && M < kPackFrom;
  thread_local Packs packs;
  float* ap = packs.a.get();
  float* bp = packs.b.get();
  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kc = std::min(KC, K - pc);
      const float block_beta = pc == 0 ? beta : 1;  // later k blocks add to the first's sum
      const float* b = B + (tb ? jc * ldb + pc : pc * ldb + jc);
      pack_b<kRound>(tb, direct_b, b, ldb, kc, nc, bp);
      for (int64_t ic = 0; ic < M; ic += MC) {
        const int64_t mc = std::min(MC, M - ic);
        const S* a = A + (ta ? pc * lda + ic : ic * lda + pc);
        if (packed_a) pack_a<kRound>(ta, a, lda, mc, kc, ap);
        // the first row of a transposed A's ragged last tile, packed alone, once for every panel
        const int64_t ragged = ta && !packed_a && mc % MR % kThird != 0 ? mc / MR * MR : -1;
        if (ragged >= 0) pack_a<kRound>(ta, a + ragged, lda, mc - ragged, kc, ap);
        for (int64_t jr = 0; jr < nc; jr += NR) {
          const bool in_place = b_in_place(direct_b, jr, nc);
          const float* panel = in_place ? b + jr : bp + jr * kc;
          for (int64_t ir = 0; ir < mc; ir += MR) {
            float* c = C + (ic + ir) * ldc + jc + jr;
            const int64_t m = std::min(MR, mc - ir), n = std::min(NR, nc - jr);
            const int64_t b_k = in_place ? ldb : NR;
            const Finish finish{&epilogue, pc + kc == K, ic + ir, jc + jr};
            const bool alone = ir == ragged;
            const float* tile = packed_a ? ap + ir * kc : ap;
            if constexpr (!kRound) {
              if (!packed_a && !alone) tile = ta ? a + ir : a + ir * lda;
            }
            const int64_t a_step = packed_a || alone ? MR : lda;
            const auto kernel =
                packed_a || ta ? kernel_for<true, kPairs>(m, n) : kernel_for<false, kPairs>(m, n);
            kernel(kc, tile, a_step, panel, b_k, block_beta, c, ldc, m, n, finish);
          }
        }
      }
    }
  }
}

}  // namespace

void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           const Epilogue<float>& epilogue) {
  packed_product<Reads::AsTheyAre>(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, epilogue);
}

template <class S>
void rounded_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const S* A, int64_t lda,
                   const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                   const Epilogue<float>& epilogue) {
  packed_product<Reads::Rounding>(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, epilogue);
}

template void rounded_sgemm(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t,
                            const float*, int64_t, float, float*, int64_t, const Epilogue<float>&);
template void rounded_sgemm(bool, bool, int64_t, int64_t, int64_t, const uint16_t*, int64_t,
                            const float*, int64_t, float, float*, int64_t, const Epilogue<float>&);

bool rounds_once(Precision precision) {
  return precision == Precision::BFloat16 && bf16_kernel() == Bf16Kernel::Emulated;
}

void gemm_rounded(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                  const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                  const Epilogue<float>& epilogue) {
  if (small_product(tb, M, N, K) || !rounds_once(Precision::BFloat16)) {
    gemm<float>(Precision::BFloat16, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, epilogue);
    return;
  }
  packed_product<Reads::Rounded>(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, epilogue);
}

namespace {

// The stored rows x cols operand X (row stride ld) rounded to bfloat16 into `out` (row stride
// cols), the steps of k (its rows when k_rows, else its columns) swapped in pairs: the register
// kernel, summing over k in order, then adds k + 1's product before k's, as vdpbf16ps does
// (gemm_bf16.h), and the products are exact, so both give the same bits. An odd K's last step
// keeps its place (vdpbf16ps pairs it with a zero, added first).
void rounded_copy(const float* X, int64_t ld, int64_t rows, int64_t cols, bool k_rows, int64_t K,
                  std::vector<float>& out) {
  out.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = X + (k_rows && (r ^ 1) < K ? r ^ 1 : r) * ld;
    float* dst = out.data() + r * cols;
    if (k_rows) {
      for (int64_t c = 0; c < cols; ++c) dst[c] = round_to_bf16(src[c]);
      continue;
    }
    int64_t c = 0;
    for (; c + 1 < cols; c += 2) {
      dst[c] = round_to_bf16(src[c + 1]);
      dst[c + 1] = round_to_bf16(src[c]);
    }
    if (c < cols) dst[c] = round_to_bf16(src[c]);
  }
}

}  // namespace

template <class T>
void gemm(Precision precision, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc,
          const Epilogue<T>& epilogue) {
  const bool small = small_product(tb, M, N, K);
  if constexpr (std::is_same_v<T, float>) {
    if (precision == Precision::BFloat16 && !small) {
      bf16_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, epilogue);
      return;
    }
    if (precision == Precision::BFloat16) {
      thread_local std::vector<float> a_rounded, b_rounded;
      rounded_copy(A, lda, ta ? K : M, ta ? M : K, ta, K, a_rounded);
      rounded_copy(B, ldb, tb ? N : K, tb ? K : N, !tb, K, b_rounded);
      A = a_rounded.data(), lda = ta ? M : K;
      B = b_rounded.data(), ldb = tb ? K : N;
    }
  }
  if (small) {
    small_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    finish_all(epilogue, C, ldc, M, N);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    sgemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, epilogue);
  } else {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, 1.0, A, lda, B, ldb, beta, C, ldc);
    finish_all(epilogue, C, ldc, M, N);
  }
}

template void gemm<float>(Precision, bool, bool, int64_t, int64_t, int64_t, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t, const Epilogue<float>&);
template void gemm<double>(Precision, bool, bool, int64_t, int64_t, int64_t, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t,
                           const Epilogue<double>&);

}  // namespace tapegrad
