// The fast room's ops, one family a file, gathered by fast_ops.cpp into the table the ops of
// ops/ ask for (fast_ops.h). Each takes its op's arguments already checked there.
#pragma once

#include <cstdint>

#include "tapegrad/autograd/fast_ops.h"
#include "tapegrad/autograd/ops/dropout.h"
#include "tapegrad/autograd/tape.h"

namespace tapegrad {

Tensor fast_matmul(const Tensor& a, const Tensor& b);  // matmul.cpp
Tensor fast_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation activation,
                   double p, uint64_t key);
Tensor fast_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       double eps);  // layernorm.cpp
SumNorm fast_add_norm(const char* op, const Tensor& x, const Tensor& d, const Tensor& weight,
                      const Tensor& bias, double eps, double p, uint64_t key, bool keep_sum);
Tensor fast_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                      const Tensor& blocked, double p, uint64_t key,
                      Tensor* weights);  // attention.cpp
Tensor fast_cross_entropy(const Tensor& logits, const Tensor& targets,
                          const CrossEntropyOptions& options);                // loss.cpp
Tensor fast_softmax(const char* op, const Tensor& x, int64_t dim, bool log);  // softmax.cpp
Tensor fast_masked_softmax(const Tensor& x, const Tensor& mask);
void fast_run_sums(const Tensor& x, int64_t rows, int64_t count, double* sums);  // reduce.cpp

// Element i's draw state in a dropout mask (random.h's counter_bits), or lanes' at once where U
// is a vector of uint64_t: consecutive elements' states are kSplitMixGamma apart, so a loop over
// them steps a state where DropoutMask::keeps multiplies each index by it. kept_at(mask,
// element i's state) is mask.keeps(i).
template <class U>
U draw_state(const DropoutMask& mask, U i) {
  return mask.key + i * kSplitMixGamma;
}
inline bool kept_at(DropoutMask mask, uint64_t state) {
  mask.key = state;  // counter_bits(key, i) is counter_bits(key + i * kSplitMixGamma, 0)
  return mask.keeps(0);
}

}  // namespace tapegrad
