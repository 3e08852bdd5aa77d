// Losses.
#pragma once

#include <cstdint>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

struct CrossEntropyOptions {
  // Targets equal to this are skipped: they add nothing to the loss or the mean's count.
  int64_t ignore_index = -100;
  // epsilon in [0, 1]: the target distribution is (1 - epsilon) one-hot + epsilon / C uniform,
  // PyTorch's definition (Szegedy et al. 2016).
  double label_smoothing = 0.0;
};

// logits [N, C], targets int64 [N] -> scalar: the mean over non-ignored rows of
// -sum_c q_c log softmax(logits)_c. When every target is ignored the loss is 0 (PyTorch gives
// NaN) and so is the gradient.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets,
                     const CrossEntropyOptions& options = {});
// The definition in primitives, which the fused kernel is tested equal to and create_graph
// differentiates: -sum(q * log_softmax(logits)) / count, q each kept row's smoothed target
// distribution (zeros on an ignored row). The targets are checked by cross_entropy.
Tensor cross_entropy_reference(const Tensor& logits, const Tensor& targets,
                               const CrossEntropyOptions& options = {});

}  // namespace tapegrad
