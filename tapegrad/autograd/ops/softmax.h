// softmax and log_softmax along one dim, each one fused kernel forward and one backward.
#pragma once

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// exp(x_i - max) / sum_j exp(x_j - max) along dim. A row that is -inf everywhere (every
// position masked) gives zeros instead of NaN, and passes no gradient.
Tensor softmax(const Tensor& x, int64_t dim);
// softmax over the last dim with the positions where `mask` is true taken as -inf: the same
// result as softmax(masked_fill(x, mask, -inf), -1) without a masked_fill pass each way.
// `mask` is bool and broadcasts to x's shape (attention: [B, 1, 1, S] padding, [T, S] causal).
Tensor masked_softmax(const Tensor& x, const Tensor& mask);
// x_i - logsumexp(x) along dim; a fully -inf row gives zeros and no gradient, like softmax.
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace tapegrad
