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

// A dropout's settings as one value: probability p, applied in training only, the mask drawn
// from gen (required when it applies). A fused op takes them (linear's epilogue, attention,
// add_layer_norm) as nn::Dropout gives them (Dropout::options()).
struct DropoutOptions {
  double p = 0;
  bool training = false;
  Generator* gen = nullptr;
};

// What a fused op applies of its dropout: the probability (0 outside training) and the mask's
// key, one draw of the generator (0 when no dropout applies).
struct DropoutDraw {
  double p;
  uint64_t key;
};

// A fused op's dropout settings checked, the messages naming op and where the settings are
// given (field): p in [0, 1], and in training with p > 0 a generator, which draws the key.
DropoutDraw draw_dropout(const char* op, const DropoutOptions& dropout, const char* field);

// Which elements a dropout of probability p keeps, given its key (one draw of the caller's
// generator): element i when dropout_bits(i's low 32 bits + offset, salt(i's high 32 bits)) >=
// p * 2^32, dropout_bits a 32-bit hash (Wellons' prospector, TheIronBorn's constants). Each
// element's fate is its own, so threads make blocks of a mask in any order and it does not depend
// on the thread count; consecutive elements hash consecutive counters, so a loop adds lane numbers
// to one and vectorises (DropoutRun), a vector holding twice the lanes of a 64-bit hash.
template <class U = uint32_t, class Salt = uint32_t>
U dropout_bits(U x, Salt salt) {
  x = ((x ^ (x >> 16)) * 0x21f0aaadU) ^ salt;
  x = (x ^ (x >> 15)) * 0x735a2d97U;
  return x ^ (x >> 15);
}
struct DropoutMask {
  DropoutMask(double p, uint64_t key);
  bool keeps(uint64_t i) const {
    return dropout_bits(static_cast<uint32_t>(i) + offset, salt(i >> 32)) >= threshold;
  }
  uint32_t salt(uint64_t high) const { return salt0 + static_cast<uint32_t>(high) * 0x9e3779b9U; }
  uint64_t key;
  uint32_t threshold, offset, salt0;  // offset, salt0: the halves of counter_bits(key, 0)
};

// What dropout multiplies a kept element by: 1 / (1 - p), and 0 at p = 1 (whatever keeps says).
inline double dropout_scale(double p) { return p < 1 ? 1.0 / (1.0 - p) : 0.0; }

}  // namespace tapegrad
