// Matrix products: through BLAS (cblas_sgemm / cblas_dgemm), or our small kernel for tiny
// ones, split between the pool's threads; and the fused Linear op built on them.
#pragma once

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// a [..., M, K] @ b [..., K, N] -> [..., M, N]. Both operands have rank >= 2; the batch dims
// (all but the last two) broadcast. A transposed view (transpose(k, -2, -1)) goes to BLAS as a
// transpose flag, not a copy; when b is a plain matrix and a is contiguous the batch is folded
// into one large gemm ([B*T, C] @ [C, OC]).
Tensor matmul(const Tensor& a, const Tensor& b);

// x [..., C] @ weight [OC, C]^T + bias [OC] -> [..., OC]: a Linear layer as one op. The
// output rows start as copies of the bias and the gemm adds into them (beta = 1), so the bias
// costs no pass of its own, and backward is two gemms and a column sum. bias may be undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// The naive triple loop, in double precision, forward only: the reference the BLAS path is
// tested against.
Tensor matmul_reference(const Tensor& a, const Tensor& b);

}  // namespace tapegrad
