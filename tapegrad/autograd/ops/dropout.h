// Inverted dropout (Srivastava et al. 2014): zero each element with probability p and scale the
// survivors by 1 / (1 - p), so the expected value is unchanged and eval needs no rescaling.
#pragma once

#include "tapegrad/autograd/random.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// The identity when !training or p == 0. p == 1 zeroes everything. The mask is drawn from gen.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);
// The same in training with the mask given by its key (one draw of a generator, DropoutMask):
// how a fused op's reference draws the fused kernel's mask again.
Tensor dropout(const Tensor& x, double p, uint64_t key);

// Which elements a dropout of probability p keeps, given its key (one draw of the caller's
// generator): element i is kept when the high 32 bits of counter_bits(key, i) are >= p * 2^32.
// Each element's fate is computed on its own, so threads make blocks of a mask in any order, the
// mask does not depend on the thread count, and a loop over elements has no branch and no
// generator state, so it vectorises.
struct DropoutMask {
  DropoutMask(double p, uint64_t key);
  bool keeps(uint64_t i) const {
    return static_cast<uint32_t>(counter_bits(key, i) >> 32) >= threshold;
  }
  uint64_t key;
  uint32_t threshold;
};

// The mask over a tensor of this shape, element i kept when mask.keeps(i): what a fused op that
// applies dropout by flat index (attention) used, as a bool tensor for its formula.
Tensor keep_mask(const Shape& shape, const DropoutMask& mask);

// What dropout multiplies a kept element by: 1 / (1 - p), and 0 at p = 1 (whatever keeps says).
inline double dropout_scale(double p) { return p < 1 ? 1.0 / (1.0 - p) : 0.0; }

}  // namespace tapegrad
