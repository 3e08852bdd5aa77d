// The bfloat16 matrix product of mixed-precision training: float32 operands rounded to
// bfloat16 (8 bits of significand, float32's range) and multiplied with float32 sums, the
// arithmetic of PyTorch's CPU autocast in bfloat16. A bfloat16 is a float32's upper 16 bits, so
// the products of two are exact in float32 and only the operands' rounding and the sums' add
// error: |C - C_exact| <= (2^-7 + 2^-16 + (K + 1) 2^-24) sum_k |a_ik| |b_kj|, the bound the
// tests hold it to.
//
// CPUs with AVX512_BF16 do a pair of k steps a vector lane an instruction (vdpbf16ps): AMD's
// Zen 4 and 5 at the float32 multiply-add's rate, twice its flops; Intel's Sapphire and Emerald
// Rapids at a quarter of it (their bfloat16 unit is AMX), half the flops of float32. There a
// kernel of float32 multiply-adds on the rounded operands does the same sums faster. One build
// runs everywhere: the kernel is chosen when first used, by what the CPU reports and by timing
// the two instructions; a CPU without AVX512_BF16 (AVX2, AVX-512 before Cooper Lake, Arm) runs
// sgemm's own kernel on operands it rounds as it packs them (rounded_sgemm, gemm.h), the
// "emulated" kernel, at about the float32 rate; linear there rounds its operands once for all
// their products, which then read them in place (rounds_once, gemm_rounded). All three round and
// sum exactly as the instruction is specified to (per pair of steps, k + 1's product is added, then
// k's), so they give the same bits on normal numbers (the instruction and the multiply-add kernel
// flush subnormals to zero).
#pragma once

#include <bit>
#include <cstdint>

#include "tapegrad/autograd/fast/gemm.h"

namespace tapegrad {

// x rounded to bfloat16 (round_to_bf16) as its 16 bits, and a bfloat16's value.
inline uint16_t to_bf16(float x) {
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(round_to_bf16(x)) >> 16);
}
inline float from_bf16(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

// The lanes of v (a GCC vector of floats) rounded to bfloat16 as round_to_bf16 rounds each.
template <class V>
V rounded_lanes(V v) {
  typedef uint32_t U __attribute__((vector_size(sizeof(V))));
  const U u = std::bit_cast<U>(v);
  const U nearest = (u + 0x7fff + (u >> 16 & 1)) & 0xffff0000u;
  return std::bit_cast<V>((u & 0x7fffffff) > 0x7f800000 ? (u | 0x400000) & 0xffff0000u : nearest);
}

// x[0, n) rounded to bfloat16 into out[0, n) (which may be x), as round_to_bf16 rounds each.
inline void round_to_bf16(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = round_to_bf16(x[i]);
}

// The kernels bf16_gemm can run: the CPU's vdpbf16ps, AVX-512 float32 multiply-adds on pairs
// packed with AVX512_BF16's conversions, or rounded_sgemm.
enum class Bf16Kernel { Native, Fma, Emulated };

// Whether this CPU (and this build, for x86-64) can run `kernel`.
bool bf16_kernel_available(Bf16Kernel kernel);

// The fastest kernel this CPU can run, chosen at the first call; bf16_kernel(), the one in use:
// the default unless set_bf16_kernel chose another (the tests run all). Choosing one the CPU
// cannot run throws an Error that says so.
Bf16Kernel bf16_default_kernel();
Bf16Kernel bf16_kernel();
void set_bf16_kernel(Bf16Kernel kernel);

// C (M,N) = bf16(op(A)) (M,K) @ bf16(op(B)) (K,N) + beta C, all row-major as sgemm takes them
// (gemm.h): op(A) = A^T when ta, A then stored (K,M); lda, ldb, ldc the row strides. The sum
// over k runs in a fixed order for each element, so a split by rows gives the same bits.
// beta == 0 never reads C. The epilogue runs on each tile of C once it is final.
void bf16_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
               const Epilogue<float>& epilogue = {});

// The same with A given as bfloat16s (to_bf16's bits), rounded already by what made them: the
// product's bits are those of the floats they were rounded from, and its packing reads half the
// bytes. linear's backward under autocast hands its products the gradient this way.
void bf16_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
               const Epilogue<float>& epilogue = {});

}  // namespace tapegrad
