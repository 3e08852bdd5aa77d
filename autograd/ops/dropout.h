// Inverted dropout (Srivastava et al. 2014): zero each element with probability p and scale the
// survivors by 1 / (1 - p), so the expected value is unchanged and eval needs no rescaling.
#pragma once

#include "autograd/random.h"
#include "autograd/tensor.h"

namespace tapegrad {

// The identity when !training or p == 0. p == 1 zeroes everything. The mask is drawn from gen.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);

}  // namespace tapegrad
