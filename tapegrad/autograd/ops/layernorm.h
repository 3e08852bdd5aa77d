// Layer normalisation over the last dim (Ba, Kiros & Hinton 2016).
#pragma once

#include "tapegrad/autograd/ops/dropout.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// x [..., C]; weight [C] and bias [C] are optional (undefined tensors to leave them out).
// out = (x - mean) / sqrt(var + eps) * weight + bias, var the biased variance, as PyTorch.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// The definition in primitives, which the fused kernels are tested equal to and create_graph
// differentiates: y = (x - mean) / sqrt(var + eps) * weight + bias over the last dim.
Tensor layer_norm_reference(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            double eps = 1e-5);

// layer_norm(x + dropout(d)): a post-norm transformer's "add & norm" after each sublayer
// (d its output, x the residual stream) as one op. Each row's sum is made and normalised
// while it is in cache, where the separate ops write and read back the dropped d and the sum;
// backward is one pass per row that writes the gradient of x and of d together. The dropout
// draws its mask like the dropout op (the mask of element i is DropoutMask's for its flat
// index), so the result is the ops' it replaces. x and d have the same shape.
Tensor add_layer_norm(const Tensor& x, const Tensor& d, const Tensor& weight, const Tensor& bias,
                      double eps = 1e-5, const DropoutOptions& dropout = {});

// The same op with the sum as a second output: sum = x + dropout(d) and norm = layer_norm(sum),
// a pre-norm transformer's residual add (the stream goes on as `sum`) and the next sublayer's
// norm of it. One tape entry with two outputs: its backward runs once both gradients are in,
// and takes the sum's and the norm's gradient in the same pass per row.
struct SumNorm {
  Tensor sum, norm;
};
SumNorm add_and_layer_norm(const Tensor& x, const Tensor& d, const Tensor& weight,
                           const Tensor& bias, double eps = 1e-5,
                           const DropoutOptions& dropout = {});
// Both fused ops' definition in primitives: sum = x + dropout(d, p, key), norm =
// layer_norm_reference(sum), with the dropout mask of one generator draw, `key` (p = 0: none).
SumNorm add_and_layer_norm_reference(const Tensor& x, const Tensor& d, const Tensor& weight,
                                     const Tensor& bias, double eps, double p, uint64_t key);

}  // namespace tapegrad
