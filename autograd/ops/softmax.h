// softmax and log_softmax along one dim, each one fused kernel forward and one backward.
#pragma once

#include "autograd/tensor.h"

namespace tapegrad {

// exp(x_i - max) / sum_j exp(x_j - max) along dim. A row that is -inf everywhere (every
// position masked) gives zeros instead of NaN, and passes no gradient.
Tensor softmax(const Tensor& x, int64_t dim);
// x_i - logsumexp(x) along dim; a fully -inf row gives zeros and no gradient, like softmax.
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace tapegrad
