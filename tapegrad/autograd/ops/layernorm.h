// Layer normalisation over the last dim (Ba, Kiros & Hinton 2016).
#pragma once

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// x [..., C]; weight [C] and bias [C] are optional (undefined tensors to leave them out).
// out = (x - mean) / sqrt(var + eps) * weight + bias, var the biased variance, as PyTorch.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

}  // namespace tapegrad
