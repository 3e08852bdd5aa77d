// Matrix products and the Linear op. The fast room (fast/matmul.cpp) runs each matrix on its
// gemm (fast/gemm.h): float products on tapegrad's own sgemm, float64 ones on OpenBLAS, split
// between the pool's threads; linear there is one fused op.
#pragma once

#include "tapegrad/autograd/bfloat16.h"
#include "tapegrad/autograd/ops/dropout.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// a [..., M, K] @ b [..., K, N] -> [..., M, N]. Both operands have rank >= 2; the batch dims
// (all but the last two) broadcast. Under an AutocastGuard a float32 product reads its operands
// rounded to bfloat16 and sums in float32 (tape.h), forward and backward. In the fast room a
// transposed view (transpose(k, -2, -1)) goes to the gemm as a transpose flag, not a copy; when
// b is a plain matrix and a is contiguous the batch is folded into one gemm, [B*T, C] @ [C, OC].
Tensor matmul(const Tensor& a, const Tensor& b);

// The activations of the library, one enum for the op and the modules (a feed-forward block's
// LayerConfig::activation).
enum class Activation { None, ReLU, GELU };

// What linear does to its output after the bias, in the matrix kernel's output pass (gemm.h's
// Epilogue) while each tile is in cache: an activation, then inverted dropout (dropout.h),
// which a feed-forward block would otherwise run as two more passes over a [.., d_ff] tensor.
struct LinearEpilogue {
  Activation activation = Activation::None;
  DropoutOptions dropout{};
};

// dropout(activation(x [..., C] @ weight [OC, C]^T + bias [OC])) -> [..., OC]: a Linear layer
// as one op, and with an epilogue the first half of a feed-forward block. The bias,
// activation and dropout are applied to each tile of the product as it is finished; backward
// is one pass through the dropout and activation (from the output for ReLU, which saves
// nothing else; from the slope saved by the forward for GELU), then two gemms and a column sum.
// bias may be undefined. The same as relu/gelu and dropout applied after it, and as those the
// mask of element i (flat index in the output) is DropoutMask's.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
              const LinearEpilogue& epilogue = {});

// linear's definition in primitives, which the fused kernel is tested equal to and create_graph
// differentiates: dropout(activation(x @ weight^T + bias), p, key), the dropout mask given by
// its key (one generator draw; p = 0: none).
Tensor linear_reference(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        Activation activation, double p, uint64_t key);

// The plain kernel: one BLAS product per batch item (OpenBLAS's cblas_sgemm or cblas_dgemm, on
// contiguous operands), in a's dtype; forward only (matmul records its backward). What the
// learner's edition runs and what the fast room's gemm paths are tested against.
Tensor matmul_reference(const Tensor& a, const Tensor& b);

}  // namespace tapegrad
