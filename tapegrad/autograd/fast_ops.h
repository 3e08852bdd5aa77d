// The door between the two rooms. An op in ops/ that has a faster implementation in the fast
// room (tapegrad/autograd/fast/) asks fast_ops() for it and runs it when given one; otherwise it
// runs its plain kernel, or its reference. Each fast op records the same derivative as the op
// it speeds up, with its own kernels beside it, and tests/autograd/test_registry.cpp holds the
// two equal. fast_ops() is null in the learner's edition (-DTAPEGRAD_FAST=OFF), which has no
// fast room, and under a ReferenceModeGuard.
#pragma once

#include <cstdint>

#include "tapegrad/autograd/ops/attention.h"
#include "tapegrad/autograd/ops/layernorm.h"
#include "tapegrad/autograd/ops/loss.h"
#include "tapegrad/autograd/ops/matmul.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// Each takes its op's arguments, checked by the op, with a dropout's mask given by its key.
struct FastOps {
  Tensor (*matmul)(const Tensor& a, const Tensor& b);
  Tensor (*linear)(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation activation,
                   double p, uint64_t key);
  Tensor (*layer_norm)(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
  // add_layer_norm (keep_sum false: the norm only) and add_and_layer_norm, named `op`
  SumNorm (*add_norm)(const char* op, const Tensor& x, const Tensor& d, const Tensor& weight,
                      const Tensor& bias, double eps, double p, uint64_t key, bool keep_sum);
  Tensor (*attention)(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                      const Tensor& blocked, double p, uint64_t key, Tensor* weights);
  Tensor (*cross_entropy)(const Tensor& logits, const Tensor& targets,
                          const CrossEntropyOptions& options);
  // softmax and log_softmax
  Tensor (*softmax)(const char* op, const Tensor& x, int64_t dim, bool log);
  Tensor (*masked_softmax)(const Tensor& x, const Tensor& mask);
  // sum and mean over the last dims of a contiguous x: sums[i] = the sum of the run
  // x[i * count, (i + 1) * count), in double, for i < rows
  void (*run_sums)(const Tensor& x, int64_t rows, int64_t count, double* sums);
};

// The derivatives of primitives the fast room computes, which it records beside its kernels
// (defined in ops/*.cpp, each in terms of what it captures: matmul's inputs, softmax's output
// y, detached).
BackwardFn matmul_backward(const Tensor& a, const Tensor& b);
BackwardFn softmax_backward(const Tensor& y, int64_t dim, bool log);

// The fast room's ops, or null (the learner's edition, or a ReferenceModeGuard).
const FastOps* fast_ops();

// What the build linked: the fast room's table (fast/fast_ops.cpp) or null
// (learner_edition.cpp).
const FastOps* installed_fast_ops();

}  // namespace tapegrad
