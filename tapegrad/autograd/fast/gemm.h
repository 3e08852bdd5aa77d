// tapegrad's own single-precision matrix product, the kernel under matmul and linear.
//
// Why not OpenBLAS for float: the Debian OpenBLAS (0.3.21) picks its kernels by CPU model and
// does not know every recent AMD core: on one of our machines it ran its AVX2 (Haswell) kernel
// on a CPU with 512-bit FMA units, at half the speed it could (and which kernel it picked even
// varied between runs of the same binary); where it does pick its AVX-512 kernel, this one
// keeps level with it. Its calls also take a lock, which two threads calling at once contend
// on. This kernel is compiled for the machine it is built on (TAPEGRAD_NATIVE) and holds no
// lock. float64, which serves the gradchecks, stays on OpenBLAS.
#pragma once

#include <cstdint>

#include "tapegrad/autograd/bfloat16.h"

namespace tapegrad {

// Asks for steps [k0, k1) of an operand whose steps are `lines` consecutive values (step k at
// src + k * k_step): the packers take a few steps at a time and fetch the next few meanwhile.
template <class S>
void prefetch_steps(const S* src, int64_t k_step, int64_t k0, int64_t k1, int64_t lines) {
  constexpr int64_t kLine = 64 / sizeof(S);  // values in a cache line
  for (int64_t k = k0; k < k1; ++k) {
    for (int64_t l = 0; l < lines; l += kLine) __builtin_prefetch(src + k * k_step + l);
  }
}

// A row piece c[0, n) of C, final: the bias's columns added (null: none), then max(c, 0) with
// relu; what the kernel does to whole vectors as it stores them, for ragged tiles and whole Cs.
template <class T>
void bias_relu(T* c, int64_t n, const T* bias, bool relu) {
  for (int64_t j = 0; j < n && bias; ++j) c[j] += bias[j];
  for (int64_t j = 0; j < n && relu; ++j) c[j] = c[j] > 0 ? c[j] : T{0};
}

// Work done on C's elements once they are final, in the kernel's output pass while they are
// still in cache, instead of in a loop of its own over C. As the kernel stores its registers:
// bias[j] added to every element of column j (bias null: none), then, with relu, max(c, 0)
// (0 for NaN). Then fn(ctx, c, ldc, row, col, m, n) for blocks of C: m row pieces of n, piece i
// at c + i ldc, C[row + i, col : col + n) (row and col counted from C's corner), each element in
// one block once (a kernel's tile, or the whole of C: one call for many rows, whose setup a call
// per row would repeat). linear applies its bias, activation and dropout this way. Empty (no
// bias, no relu, fn null) does nothing.
template <class T>
struct Epilogue {
  void (*fn)(const void* ctx, T* c, int64_t ldc, int64_t row, int64_t col, int64_t m,
             int64_t n) = nullptr;
  const void* ctx = nullptr;
  const T* bias = nullptr;  // [N]
  bool relu = false;
  bool empty() const { return !bias && !relu && !fn; }
  // All of it on the block of m row pieces c[i ldc, i ldc + n) = C[row + i, col : col + n), final.
  void finish(T* c, int64_t ldc, int64_t row, int64_t col, int64_t m, int64_t n) const {
    for (int64_t i = 0; i < m; ++i) bias_relu(c + i * ldc, n, bias ? bias + col : nullptr, relu);
    if (fn) fn(ctx, c, ldc, row, col, m, n);
  }
};

// C (M,N) = op(A) (M,K) @ op(B) (K,N) + beta C, all row-major; op(A) = A^T when ta (A is then
// stored (K,M)), likewise op(B). lda, ldb, ldc are the row strides of the stored matrices.
// The sum over k runs in a fixed order for each element, whatever M and N are, so a product
// split by rows between threads gives the same bits as the whole.
void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           const Epilogue<float>& epilogue = {});

// sgemm's product of the operands rounded to bfloat16 as it packs them (an A of bfloat16s,
// to_bf16's bits, widened), each pair of steps summed as vdpbf16ps sums it, k + 1's product
// before k's: the products are exact, so its bits are bf16_gemm's (gemm_bf16.h), which runs it
// where the CPU has no bfloat16 kernel. S: float or uint16_t.
template <class S>
void rounded_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const S* A, int64_t lda,
                   const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                   const Epilogue<float>& epilogue = {});

// Whether products in `precision` run faster from operands their caller rounds to bfloat16 once,
// for all the products that read them (gemm_rounded), than from floats each product rounds as
// it packs them: in Precision::BFloat16 on rounded_sgemm, which packs every operand to round it
// where sgemm reads most in place; the other kernels pack every operand anyway.
bool rounds_once(Precision precision);

// gemm (below) in Precision::BFloat16 of operands that hold bfloat16 values already (rounded by
// the caller, as round_to_bf16 rounds): the same bits. Where rounds_once, read in place as sgemm
// reads its operands, in bf16_gemm's order.
void gemm_rounded(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                  const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                  const Epilogue<float>& epilogue = {});

// The same product for T = float or double, by size and precision: tiny products (a small
// model's attention heads) and products of a few rows over a small or row-major B on a register
// kernel without packing, other floats on sgemm, doubles on OpenBLAS. beta == 0 never reads C.
// Every float path sums each element in sgemm's order, so a split by rows gives the same bits.
// In Precision::BFloat16 (floats only) the operands are read rounded to bfloat16: bf16_gemm
// (gemm_bf16.h) takes the products sgemm would, the register kernel the others from rounded
// copies, each element summed in bf16_gemm's order (a split still gives the same bits). What
// matmul, linear and attention run for each matrix.
template <class T>
void gemm(Precision precision, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc,
          const Epilogue<T>& epilogue = {});

// Whether gemm runs a product of these sizes on its register kernel without packing (the
// tiny products above), which in Precision::BFloat16 rounds a copy of each operand a product.
bool small_product(bool tb, int64_t M, int64_t N, int64_t K);

}  // namespace tapegrad
