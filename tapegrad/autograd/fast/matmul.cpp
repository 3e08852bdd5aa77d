// matmul: C = op(A) op(B), one gemm per batch element (or one in all when folded; gemm.h).
//
// Each operand's last two dims must be a BLAS-style matrix: row-major with unit column stride
// (no transpose, ld = row stride) or its transpose (unit row stride, ld = column stride). Any
// other view is first made contiguous. Gradient buffers are always contiguous, and beta = 1
// makes the gemm accumulate straight into them, summing over broadcast batch dims for free.
#include <algorithm>
#include <array>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "tapegrad/autograd/fast/fast_room.h"
#include "tapegrad/autograd/fast/gemm.h"
#include "tapegrad/autograd/fast/gemm_bf16.h"
#include "tapegrad/autograd/fast/vmath.h"
#include "tapegrad/autograd/ops/dropout.h"
#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/autograd/strided.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/autograd/threads.h"
#include "tapegrad/profile/profile.h"

namespace tapegrad {

namespace {

struct Layout {
  bool trans;  // stored as the transpose of the logical matrix
  int64_t ld;  // leading dimension of the stored row-major matrix
};

// How BLAS can read the last two dims of t, if it can.
std::optional<Layout> blas_layout(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const int64_t rs = t.strides()[t.dim() - 2], cs = t.strides()[t.dim() - 1];
  if (rows == 0 || cols == 0) return Layout{false, std::max<int64_t>(1, cols)};  // no gemm reads it
  if ((cs == 1 || cols == 1) && rs >= std::max<int64_t>(1, cols)) return Layout{false, rs};
  if ((rs == 1 || rows == 1) && cs >= std::max<int64_t>(1, rows)) return Layout{true, cs};
  if (rows == 1 && cols == 1) return Layout{false, 1};
  return std::nullopt;
}

// Batch strides of t (its dims but the last two), seen from the broadcast batch shape.
Shape batch_strides(const Shape& shape, const Shape& strides, const Shape& batch) {
  const Shape s(shape.begin(), shape.end() - 2);
  const Shape st(strides.begin(), strides.end() - 2);
  return broadcast_strides(s, st, batch);
}

// C[i] = op(A[i]) op(B[i]) + beta C[i] for every i of the batch, where items that share a C
// (a batch dim it is broadcast along) add up. Each matrix operand is given by its base pointer,
// layout and batch strides. The threads split the batch items when each
// item has its own C, else the rows of C (every thread then walks the whole batch over its
// rows, which keeps a sum over a broadcast batch in one thread per row and in order).
template <class T>
void batched_gemm(Precision precision, const Shape& batch, int64_t M, int64_t N, int64_t K,  //
                  const T* A, Layout la, const Shape& sa,                                    //
                  const T* B, Layout lb, const Shape& sb,                                    //
                  T beta, T* C, int64_t ldc, const Shape& sc) {
  profile::note_flops(2.0 * static_cast<double>(numel(batch)) * static_cast<double>(M) *
                      static_cast<double>(N) * static_cast<double>(K));
  std::vector<std::array<int64_t, 3>> items;
  items.reserve(numel(batch));
  for_each_offset<3>(batch, {&sa, &sb, &sc}, [&](const auto& o) { items.push_back(o); });
  bool shared_c = false;  // a batch dim along which C does not move: items sum into one C
  for (size_t d = 0; d < batch.size(); ++d) shared_c = shared_c || (batch[d] > 1 && sc[d] == 0);
  const double flops = std::max(1.0, 2.0 * static_cast<double>(M) * N * K);
  const auto items_count = static_cast<int64_t>(items.size());
  if (items_count > 1 && !shared_c) {
    parallel_for(items_count, static_cast<int64_t>(kGrainFlops / flops) + 1,
                 [&](int64_t b, int64_t e) {
                   for (int64_t i = b; i < e; ++i) {
                     const auto& o = items[i];
                     gemm<T>(precision, la.trans, lb.trans, M, N, K, A + o[0], la.ld, B + o[1],
                             lb.ld, beta, C + o[2], ldc);
                   }
                 });
    return;
  }
  if (shared_c && beta == T{0}) {  // the items add up: start every C at zero, then add
    for (const auto& o : items) {
      for (int64_t r = 0; r < M; ++r) std::fill_n(C + o[2] + r * ldc, N, T{0});
    }
    beta = T{1};
  }
  const double row_flops =
      flops / static_cast<double>(std::max<int64_t>(1, M)) * static_cast<double>(items_count);
  parallel_for(M, static_cast<int64_t>(kGrainFlops / row_flops) + 1, [&](int64_t r0, int64_t r1) {
    // Rows r0..r1 of op(A): rows of A, or columns of A when it is stored transposed.
    const int64_t a_step = la.trans ? r0 : r0 * la.ld;
    for (const auto& o : items) {
      gemm<T>(precision, la.trans, lb.trans, r1 - r0, N, K, A + o[0] + a_step, la.ld, B + o[1],
              lb.ld, beta, C + o[2] + r0 * ldc, ldc);
    }
  });
}

}  // namespace

Tensor fast_matmul(const Tensor& a_in, const Tensor& b_in) {
  const Shape a_batch(a_in.shape().begin(), a_in.shape().end() - 2);
  const Shape b_batch(b_in.shape().begin(), b_in.shape().end() - 2);
  Shape batch = broadcast_shapes("matmul", a_batch, b_batch);

  const Tensor a = blas_layout(a_in) ? a_in : a_in.contiguous();
  const Tensor b = blas_layout(b_in) ? b_in : b_in.contiguous();
  const Layout la = *blas_layout(a), lb = *blas_layout(b);
  int64_t M = a.size(-2);
  const int64_t K = a.size(-1), N = b.size(-1);

  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  // beta = 0 overwrites the output, so it needs no zeroing unless K == 0 (no gemm runs)
  Tensor out = K == 0 ? zeros(out_shape, a.dtype()) : empty(out_shape, a.dtype());
  if (out.numel() == 0) return out;

  // Fold [..., M, K] @ [K, N] into one [prod(...) * M, K] @ [K, N] gemm.
  if (b.dim() == 2 && !la.trans && a.is_contiguous()) {
    M *= numel(batch);
    batch.clear();
  }
  const bool folded = batch.empty() && a.dim() > 2;
  // Batch strides of an operand (given its storage strides), none when folded.
  auto strides_of = [&](const Tensor& t, const Shape& st) {
    return folded ? Shape{} : batch_strides(t.shape(), st, batch);
  };
  const Shape sa = strides_of(a, a.strides());
  const Shape sb = strides_of(b, b.strides());
  const Shape sc = strides_of(out, out.strides());
  const Precision precision = product_precision(a.dtype());

  dispatch_floating("matmul", a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (K == 0) return;  // the product of empty inner dims is the zero matrix
    batched_gemm<T>(precision, batch, M, N, K, a.data<T>(), la, sa, b.data<T>(), lb, sb, T{0},
                    out.data<T>(), N, sc);
  });

  if (recording(a, b)) {
    const Shape a_grad_strides = strides_of(a, contiguous_strides(a.shape()));
    const Shape b_grad_strides = strides_of(b, contiguous_strides(b.shape()));
    record(op_name("matmul"), {a, b}, out,
           {.backward = matmul_backward(a, b),
            .fast =
                [a = a.detach(), b = b.detach(), la, lb, batch, M, N, K, sa, sb, sc, a_grad_strides,
                 b_grad_strides, precision](const Tensor& dout, Grads& g) {
                  if (K == 0) return;
                  dispatch_floating("matmul", dout.dtype(), [&](auto tag) {
                    using T = decltype(tag);
                    const T* dc = dout.data<T>();
                    const Layout ldc{false, N};
                    // dA [M, K] += dC [M, N] @ op(B)^T ; op(B)^T reads B with the flag flipped
                    if (g.wants(0)) {
                      const auto [da, first] = g.write(0, Writes::Every);
                      batched_gemm<T>(precision, batch, M, K, N, dc, ldc, sc, b.data<T>(),
                                      {!lb.trans, lb.ld}, sb, first ? T{0} : T{1}, da.data<T>(), K,
                                      a_grad_strides);
                    }
                    // dB [K, N] += op(A)^T @ dC [M, N]
                    if (g.wants(1)) {
                      const auto [db, first] = g.write(1, Writes::Every);
                      batched_gemm<T>(precision, batch, K, N, M, a.data<T>(), {!la.trans, la.ld},
                                      sa, dc, ldc, sc, first ? T{0} : T{1}, db.data<T>(), N,
                                      b_grad_strides);
                    }
                  });
                }},
           {{"a", a}, {"b", b}});
  }
  return out;
}

namespace {

// How many shares to split `flops` of product into, one per thread at most.
int shares_of(double flops) {
  return static_cast<int>(std::clamp<double>(flops / kGrainFlops, 1, num_threads()));
}

// Share p of n rows (or columns) split `shares` ways: [n p / shares, n (p + 1) / shares).
std::pair<int64_t, int64_t> share(int64_t n, int64_t p, int shares) {
  return {n * p / shares, n * (p + 1) / shares};
}

// Whether linear's weight gradient dw [OC, C] = dh^T x sums its N rows as two halves, [0, N/2)
// and [N/2, N), the second's sum added to the first's once both are done. A thread then packs
// half of each operand, the rows it made itself (linear, its tail and the ops around it split
// rows the same way), where splitting dw's rows (or columns) between threads has each pack all
// of the other operand: as much again as its own part when the weight is about square. Chosen
// by the shapes alone, so the bits do not depend on the thread count. Halves of at least 128
// rows; below 1024 rows (a small model's step, whose k blocks are short either way) when the
// rows are at least the weight's longer side, so the final add (which reads dw again) costs
// less than the packing it saves; above, for weights no more than twice as long as wide and not
// tiny, and halves that fill the packed kernels' k blocks (512 steps).
bool weight_grad_in_halves(int64_t N, int64_t OC, int64_t C) {
  const int64_t longer = std::max(OC, C), shorter = std::min(OC, C);
  if (N < 256) return false;
  if (N < 1024) return N >= longer;
  return longer <= 2 * shorter && OC * C >= 128 * 128;
}

// How linear's products read their operands: in `precision`, or (rounded) holding the bfloat16
// values linear rounded them to once, for all the products that read them (rounds_once, gemm.h).
struct LinearReads {
  Precision precision;
  bool rounded;
};

// t as linear's products read it: when reads.rounded, its floats rounded to bfloat16 (a new
// tensor); else t itself.
Tensor operand(const Tensor& t, LinearReads reads) {
  if (!reads.rounded) return t;
  Tensor out = empty(t.shape(), t.dtype());
  const float* src = t.data<float>();
  float* dst = out.data<float>();
  parallel_for(t.numel(), kGrainElements,
               [&](int64_t b, int64_t e) { round_to_bf16(src + b, e - b, dst + b); });
  return out;
}

// gemm as `reads` says; for an A of bfloat16s (linear's dh under autocast), bf16_gemm.
template <class T>
void product(LinearReads reads, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A,
             int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc,
             const Epilogue<T>& epilogue = {}) {
  if constexpr (std::is_same_v<T, float>) {
    if (reads.rounded) {
      gemm_rounded(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, epilogue);
      return;
    }
  }
  gemm<T>(reads.precision, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc, epilogue);
}
void product(LinearReads, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* A,
             int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  bf16_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

// Share p of `shares` of dw [OC, C] += dh^T x (dy: dh [N, OC], px: x [N, C]; beta 0 assigns).
// In halves (weight_grad_in_halves): half 0 into dw, half 1 into `upper` (beta 0), each share
// taking half p % 2 (both when alone) over its part of dw's rows. Else split along dw's longer
// side: each share packs all of the shorter operand and its part of the longer one.
template <class T, class D>
void weight_grad_share(LinearReads reads, int64_t p, int shares, bool halves, const D* dy,
                       const T* px, int64_t N, int64_t OC, int64_t C, T beta, T* dw, T* upper) {
  if (!halves) {
    if (const auto [c0, c1] = share(OC, p, shares); OC >= C && c1 > c0) {  // dh's columns
      product(reads, true, false, c1 - c0, C, N, dy + c0, OC, px, C, beta, dw + c0 * C, C);
    }
    if (const auto [j0, j1] = share(C, p, shares); OC < C && j1 > j0) {
      product(reads, true, false, OC, j1 - j0, N, dy, OC, px + j0, C, beta, dw + j0, C);
    }
    return;
  }
  for (int64_t h = 0; h < 2; ++h) {
    if (shares > 1 && h != p % 2) continue;
    const int in_half = shares == 1 ? 1 : (shares + 1 - static_cast<int>(h)) / 2;
    const auto [r0, r1] = share(OC, shares == 1 ? 0 : p / 2, in_half);
    const auto [n0, n1] = share(N, h, 2);
    if (r1 == r0) continue;
    product(reads, true, false, r1 - r0, C, n1 - n0, dy + n0 * OC + r0, OC, px + n0 * C, C,
            h == 0 ? beta : T{0}, (h == 0 ? dw : upper) + r0 * C, C);
  }
}

// linear's epilogue over its output [N, OC] after the bias and a ReLU (which gemm applies),
// applied by gemm to blocks of one share's product, whose corner is at (row0, col0) of the
// output: GELU (and, when recorded, its slope kept for the backward), the dropout of element
// (row, col) by its flat index.
template <class T>
struct LinearTail {
  T* slope;  // [N, OC], or null
  Activation activation;
  const DropoutMask* mask;  // null without dropout
  T scale;                  // dropout_scale
  int64_t OC, row0, col0;

  static void apply(const void* ctx, T* block, int64_t ldc, int64_t row, int64_t col, int64_t m,
                    int64_t n) {
    const LinearTail t = *static_cast<const LinearTail*>(ctx);  // a local: c's stores can't alias
    for (int64_t i = 0; i < m; ++i) {
      T* __restrict c = block + i * ldc;
      const int64_t r = t.row0 + row + i, j0 = t.col0 + col;
      if (t.activation == Activation::GELU) {
        if (t.slope) {
          T* __restrict slope = t.slope + r * t.OC + j0;
          for (int64_t j = 0; j < n; ++j) c[j] = vgelu_and_slope(c[j], slope + j);
        } else {
          for (int64_t j = 0; j < n; ++j) c[j] = vgelu(c[j]);
        }
      }
      if (t.mask) {
        const DropoutRun run(*t.mask, static_cast<uint64_t>(r * t.OC + j0));
        // 32-bit counters, as the hash takes them: a 64-bit j vectorises as two vectors of them
        const auto count = static_cast<uint32_t>(n);
        for (uint32_t j = 0; j < count; ++j) c[j] = run.kept(j) ? c[j] * t.scale : T{0};
      }
    }
  }
};

// Row n of dh = dout through the dropout (mask, null for none) and activation of linear's
// epilogue, into row: for ReLU from the output y alone (y > 0 exactly where the element was kept
// and its pre-activation positive; the gradient is dout * scale there, 0 elsewhere), for GELU
// from the slope its forward kept.
template <class T>
void tail_backward(T* __restrict row, const T* __restrict dout, const T* __restrict y,
                   const T* __restrict slope, Activation activation,
                   const DropoutMask* mask_or_null, T scale, int64_t OC, int64_t n) {
  const int64_t i0 = n * OC;  // element i0 + c goes to row[c]
  dout += i0;
  if (activation == Activation::ReLU) {
    // every dout read, then a select: a read under the condition would be a masked load whose
    // merge goes through the stack each element
    y += i0;
    for (int64_t c = 0; c < OC; ++c) {
      const T g = dout[c] * scale;
      row[c] = y[c] > 0 ? g : T{0};
    }
    return;
  }
  const bool gelu = activation == Activation::GELU;
  if (gelu) slope += i0;
  if (mask_or_null == nullptr) {  // GELU alone (no activation and no dropout has no tail)
    for (int64_t c = 0; c < OC; ++c) row[c] = dout[c] * slope[c];
    return;
  }
  const DropoutRun run(*mask_or_null, static_cast<uint64_t>(i0));
  for (int64_t c = 0; c < OC; ++c) {
    const T s = gelu ? slope[c] : T{1};
    row[c] = run.kept(static_cast<uint32_t>(c)) ? dout[c] * scale * s : T{0};
  }
}

// Blocks [b0, b1) of kSumBlockRows rows of dh, as tail_backward makes them, into dh ([N, OC]): in
// T, rounded to bfloat16 when `round` (the products' operand, rounded once), or as bfloat16s (D
// uint16_t, under autocast), rounded as the products would round them when they pack them, which
// then read half the bytes. Each block's rows are summed in order, in T, unrounded, into
// partial[block] (OC; null: no bias), which the bias gradient sums in block order: dh is not
// read again for it, and the bits do not depend on the thread count.
template <class D, class T>
void tail_blocks(D* dh, bool round, T* partial, const T* dout, const T* y, const T* slope,
                 Activation activation, const DropoutMask* mask, T scale, int64_t N, int64_t OC,
                 int64_t b0, int64_t b1) {
  constexpr bool bits = std::is_same_v<D, uint16_t>;
  std::vector<T> buffer(bits ? static_cast<size_t>(OC) : 0);
  for (int64_t b = b0; b < b1; ++b) {
    T* sums = partial ? partial + b * OC : nullptr;
    if (sums) std::fill_n(sums, OC, T{0});
    for (int64_t n = b * kSumBlockRows; n < std::min(N, (b + 1) * kSumBlockRows); ++n) {
      T* row = buffer.data();
      if constexpr (!bits) row = dh + n * OC;
      tail_backward<T>(row, dout, y, slope, activation, mask, scale, OC, n);
      for (int64_t c = 0; c < OC && sums; ++c) sums[c] += row[c];
      if constexpr (bits) {
        for (int64_t c = 0; c < OC; ++c) dh[n * OC + c] = to_bf16(row[c]);
      } else if constexpr (std::is_same_v<T, float>) {
        if (round) round_to_bf16(row, OC, row);
      }
    }
  }
}

// Input i's gradient buffer, when wanted (and `nonempty`), and the beta of a product writing
// it: 0 for its first writer, else 1 (adding).
template <class T>
std::pair<T*, T> product_target(Grads& g, size_t i, bool nonempty) {
  if (!g.wants(i) || !nonempty) return {nullptr, T{1}};
  const auto [grad, first] = g.write(i, Writes::Every);
  return {grad.data<T>(), first ? T{0} : T{1}};
}

// linear's recorded backward, and what it keeps of the forward: dh through the tail, then
// every thread's share of dx, dw and dbias in one parallel loop.
struct LinearBackward {
  Tensor x, w, y, slope;  // the products' operands (rounded when reads.rounded); y: the output,
                          // kept for a tail; slope: GELU's
  Activation activation;
  DropoutMask mask;
  double scale;
  bool drop, tail, with_bias;
  int64_t N, C, OC;
  LinearReads reads;

  template <class T>
  void run(const Tensor& dout, Grads& g) const {
    const T *px = x.data<T>(), *pw = w.data<T>();
    T *dx, *dw, beta_x, beta_w;  // plain variables: clang 14 cannot capture structured bindings
    std::tie(dx, beta_x) = product_target<T>(g, 0, C > 0);
    std::tie(dw, beta_w) = product_target<T>(g, 1, C > 0);
    T* db = with_bias && g.wants(2) ? g.write(2, Writes::Some).grad.data<T>() : nullptr;
    const bool halves = dw && weight_grad_in_halves(N, OC, C);
    Tensor upper = halves ? empty({OC, C}, dout.dtype()) : Tensor();
    const int shares = shares_of(4.0 * static_cast<double>(N) * static_cast<double>(C) * OC);
    // The products from dh (in T, or bfloat16s), dbias from the sums of `rows` rows of `sums`
    // (dh's own, or its blocks').
    const auto products = [&](const auto* dh, const T* sums, int64_t rows) {
      parallel_for(shares, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          // dx [N, C] += dh [N, OC] @ w [OC, C]
          if (const auto [n0, n1] = share(N, p, shares); dx && n1 > n0) {
            product(reads, false, false, n1 - n0, C, OC, dh + n0 * OC, OC, pw, C, beta_x,
                    dx + n0 * C, C);
          }
          // dw [OC, C] += dh^T @ x [N, C]
          if (dw) {
            weight_grad_share(reads, p, shares, halves, dh, px, N, OC, C, beta_w, dw,
                              halves ? upper.data<T>() : nullptr);
          }
          const auto [c0, c1] = share(OC, p, shares);
          if (db) column_sums<T>(db, sums, rows, OC, c0, c1);
        }
      });
      if (halves) {  // the second half's sum added to the first's
        const T* pu = upper.data<T>();
        parallel_for(OC * C, kGrainElements, [&](int64_t e0, int64_t e1) {
          for (int64_t e = e0; e < e1; ++e) dw[e] += pu[e];
        });
      }
    };
    if (!tail) {  // dh is dout (the bias's gradient sums it unrounded)
      const Tensor dh = operand(dout, reads);
      products(dh.data<T>(), dout.data<T>(), N);
      return;
    }
    const int64_t blocks = (N + kSumBlockRows - 1) / kSumBlockRows;
    const Tensor sums = db ? empty({blocks, OC}, dout.dtype()) : Tensor();
    T* psums = db ? sums.data<T>() : nullptr;
    // dh through the tail, in T or bfloat16s (tail_blocks), then the products from it
    const auto through_tail = [&](auto* dh) {
      parallel_for(blocks, grain_of_items(kSumBlockRows * OC), [&](int64_t b0, int64_t b1) {
        tail_blocks(dh, reads.rounded, psums, dout.data<T>(), y.data<T>(),
                    slope.defined() ? slope.data<T>() : nullptr, activation, drop ? &mask : nullptr,
                    static_cast<T>(scale), N, OC, b0, b1);
      });
      products(dh, psums, blocks);
    };
    if constexpr (std::is_same_v<T, float>) {
      if (reads.precision == Precision::BFloat16 && !reads.rounded) {
        const Tensor dh16 = empty({(N * OC + 3) / 4}, DType::Int64);  // 4 bfloat16s a value
        through_tail(reinterpret_cast<uint16_t*>(dh16.data<int64_t>()));
        return;
      }
    }
    const Tensor dh = empty(dout.shape(), dout.dtype());
    through_tail(dh.data<T>());
  }
};

// linear's forward, a share at a time: out [n0:n1, c0:c1] = x [n0:n1] @ w [c0:c1]^T, then the
// tail, each share taking its part of x's rows (by_rows) or of w's. x_read and w_read are x and
// w as the products read them (operand); where reads.rounded and the shares split x's rows, each
// share rounds its rows of x into x_read just before its product.
struct LinearForward {
  const Tensor &x, &x_read, &w_read, &b, &out, &slope;  // slope: GELU's, kept; or undefined
  Activation activation;
  const DropoutMask* mask;  // null without dropout
  double scale;
  LinearReads reads;
  int64_t N, C, OC;
  int shares;
  bool by_rows;

  template <class T>
  void run(int64_t p) const {
    const auto [n0, n1] = by_rows ? share(N, p, shares) : std::pair<int64_t, int64_t>{0, N};
    const auto [c0, c1] = by_rows ? std::pair<int64_t, int64_t>{0, OC} : share(OC, p, shares);
    if (n1 == n0 || c1 == c0) return;
    if constexpr (std::is_same_v<T, float>) {  // this share's rows of x, rounded
      if (reads.rounded && by_rows) {
        round_to_bf16(x.data<T>() + n0 * C, (n1 - n0) * C, x_read.data<T>() + n0 * C);
      }
    }
    const LinearTail<T> tail{slope.defined() ? slope.data<T>() : nullptr,
                             activation,
                             mask,
                             static_cast<T>(scale),
                             OC,
                             n0,
                             c0};
    // gemm adds the bias and applies a ReLU; the tail function runs for GELU or dropout
    const bool relu = activation == Activation::ReLU;
    const bool gelu = activation == Activation::GELU;
    const Epilogue<T> finish{gelu || mask ? &LinearTail<T>::apply : nullptr, &tail,
                             b.defined() ? b.data<T>() + c0 : nullptr, relu};
    // out [n0:n1, c0:c1] = x [n0:n1] @ w [c0:c1]^T (the transpose flag), then the tail
    product<T>(reads, false, true, n1 - n0, c1 - c0, C, x_read.data<T>() + n0 * C, C,
               w_read.data<T>() + c0 * C, C, T{0}, out.data<T>() + n0 * OC + c0, OC, finish);
  }
};

}  // namespace

// Forward and backward each run as one parallel loop in which every thread takes its share of
// every product (rows or columns of out; rows of dx, of dweight and columns of dbias): one wake-up
// of the threads where a product per loop took two forward and three backward, which in a small
// model cost more than the products.
Tensor fast_linear(const Tensor& x_in, const Tensor& weight, const Tensor& bias,
                   Activation activation, double p, uint64_t key) {
  const bool drop = p > 0;
  const Tensor x = x_in.contiguous(), w = weight.contiguous();
  const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  const int64_t C = w.size(1), OC = w.size(0),
                N = numel(Shape(x.shape().begin(), x.shape().end() - 1));
  Shape out_shape = x.shape();
  out_shape.back() = OC;
  const DropoutMask mask(p, key);
  const double scale = drop ? dropout_scale(p) : 1.0;
  std::vector<Tensor> inputs{x, w};
  if (b.defined()) inputs.push_back(b);
  const bool record_it = recording(inputs);
  // an activation or dropout after the product: the epilogue and backward have a tail to run
  const bool tail = activation != Activation::None || drop;
  // GELU's backward needs its slope at the input, which the output does not give back.
  const bool keep_slope = record_it && activation == Activation::GELU;
  // Every element is written by the gemm (beta = 0), or by its K == 0 path.
  Tensor out = empty(out_shape, x.dtype());
  Tensor slope = keep_slope ? empty(out_shape, x.dtype()) : Tensor();
  const double flops = 2.0 * static_cast<double>(N) * static_cast<double>(C) * OC;
  profile::note_flops(flops);
  const int shares = shares_of(flops);
  // Each share reads all of one operand: split the rows of x when it has more rows than w
  // (training), w's when x is the smaller (decoding: a row per hypothesis).
  const bool by_rows = N >= OC;
  // x and w as every product reads them, the backward's too: rounded once when reads.rounded,
  // x's rows by the share that reads them, just before, when the shares split them
  const Precision precision = product_precision(x.dtype());
  const LinearReads reads{precision, rounds_once(precision)};
  const bool round_rows = reads.rounded && by_rows;
  const Tensor x_read = round_rows ? empty(x.shape(), x.dtype()) : operand(x, reads);
  const Tensor w_read = operand(w, reads);
  const LinearForward forward{
      x,     x_read, w_read, b, out, slope,  activation, drop ? &mask : nullptr,
      scale, reads,  N,      C, OC,  shares, by_rows};
  dispatch_floating("linear", x.dtype(), [&](auto tag) {
    parallel_for(shares, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) forward.run<decltype(tag)>(p);
    });
  });
  if (record_it) {
    record(op_name("linear"), inputs, out,
           {.fast =
                [backward = LinearBackward{x_read.detach(), w_read.detach(),
                                           tail ? out.detach() : Tensor(), slope, activation, mask,
                                           scale, drop, tail, b.defined(), N, C, OC, reads},
                 flops](const Tensor& dout_in, Grads& g) {
                  if (backward.N == 0 || backward.OC == 0) return;
                  profile::note_flops(flops * ((g.wants(0) ? 1 : 0) + (g.wants(1) ? 1 : 0)));
                  dispatch_floating("linear", dout_in.dtype(),
                                    [&](auto tag) { backward.run<decltype(tag)>(dout_in, g); });
                },
            .reference =
                [x = x.detach(), w = w.detach(), b = b.defined() ? b.detach() : Tensor(),
                 activation, p, key = mask.key](Grads& g) {
                  return std::vector{linear_reference(g.input(0, x), g.input(1, w),
                                                      b.defined() ? g.input(2, b) : b, activation,
                                                      p, key)};
                }},
           {{"x", x}, {"w", w}, {"GELU's slope", slope}});
  }
  return out;
}

}  // namespace tapegrad
