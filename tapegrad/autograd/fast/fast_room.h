// The fast room's ops, one family a file, gathered by fast_ops.cpp into the table the ops of
// ops/ ask for (ops/registry.h). Each takes its op's arguments already checked there.
#pragma once

#include <cstdint>

#include "tapegrad/autograd/fast_kernel.h"
#include "tapegrad/autograd/ops/dropout.h"
#include "tapegrad/autograd/ops/registry.h"
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

// Elements start + j, j < 2^32, of a dropout mask, as a loop makes them: kept(j) is
// mask.keeps(start + j), from the counter of the low 32 bits and the salt of the high ones (the
// next salt once the low bits wrapped), for j a uint32_t or a vector of them (then the flags,
// -1 where kept). A loop with the run in a local vectorises, the hash included.
struct DropoutRun {
  DropoutRun(const DropoutMask& mask, uint64_t start)
      : low(static_cast<uint32_t>(start)),
        offset(mask.offset),
        salt(mask.salt(start >> 32)),
        next(mask.salt((start >> 32) + 1)),
        threshold(mask.threshold) {}
  template <class U>
  auto kept(U j) const {
    const U at = low + j;
    return dropout_bits<U>(at + offset, at < low ? U{} + next : U{} + salt) >= threshold;
  }
  uint32_t low, offset, salt, next, threshold;
};

}  // namespace tapegrad
