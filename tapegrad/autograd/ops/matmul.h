// Matrix products and the fused Linear op, split between the pool's threads. Each matrix goes
// to gemm() (gemm.h): float products to tapegrad's own sgemm, float64 ones to OpenBLAS.
#pragma once

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// a [..., M, K] @ b [..., K, N] -> [..., M, N]. Both operands have rank >= 2; the batch dims
// (all but the last two) broadcast. A transposed view (transpose(k, -2, -1)) goes to the gemm as a
// transpose flag, not a copy; when b is a plain matrix and a is contiguous the batch is folded
// into one large gemm ([B*T, C] @ [C, OC]).
Tensor matmul(const Tensor& a, const Tensor& b);

// x [..., C] @ weight [OC, C]^T + bias [OC] -> [..., OC]: a Linear layer as one op. The
// output rows start as copies of the bias and the gemm adds into them (beta = 1), so the bias
// costs no pass of its own, and backward is two gemms and a column sum. bias may be undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// The naive triple loop, in double precision, forward only: the reference the gemm paths are
// tested against.
Tensor matmul_reference(const Tensor& a, const Tensor& b);

}  // namespace tapegrad
