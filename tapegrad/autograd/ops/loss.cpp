// Cross-entropy as its definition in primitives: the mean over the rows kept of
// -sum_c q_c log_softmax(logits)_c, with q the smoothed target distribution. Its gradients of
// every order come from differentiating this; its first derivative is the famous softmax - q.
// The fused kernel that computes the same faster is the fast room's (fast/loss.cpp).
#include "tapegrad/autograd/ops/loss.h"

#include <algorithm>

#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/ops/registry.h"
#include "tapegrad/autograd/ops/softmax.h"

namespace tapegrad {

Tensor cross_entropy_reference(const Tensor& logits, const Tensor& targets,
                               const CrossEntropyOptions& options) {
  const int64_t N = logits.size(0), C = logits.size(1);
  const double eps = options.label_smoothing;
  // q, the smoothed target distribution of each row kept; zeros on an ignored row
  Tensor q = zeros({N, C}, DType::Float64);
  double* pq = q.data<double>();
  const Tensor t = targets.contiguous();
  const int64_t* y = t.data<int64_t>();
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (y[n] == options.ignore_index) continue;
    ++count;
    for (int64_t c = 0; c < C; ++c) pq[n * C + c] = eps / static_cast<double>(C);
    pq[n * C + y[n]] += 1 - eps;
  }
  const Tensor loss = neg(sum(q.to(logits.dtype()) * log_softmax(logits, -1)));
  return loss / static_cast<double>(std::max<int64_t>(count, 1));
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets,
                     const CrossEntropyOptions& options) {
  TG_CHECK(logits.dim() == 2, "cross_entropy: logits must be [N, C], got shape {}", logits.shape());
  TG_CHECK(targets.dtype() == DType::Int64, "cross_entropy: targets must be int64, got {}",
           targets.dtype());
  TG_CHECK(targets.dim() == 1 && targets.size(0) == logits.size(0),
           "cross_entropy: targets of shape {} do not match logits of shape {}", targets.shape(),
           logits.shape());
  const double eps = options.label_smoothing;
  TG_CHECK(eps >= 0 && eps <= 1, "cross_entropy: label_smoothing must be in [0, 1], got {}", eps);
  const int64_t C = logits.size(1);
  const Tensor t = targets.contiguous();
  const int64_t* y = t.data<int64_t>();
  for (int64_t n = 0; n < t.numel(); ++n) {
    TG_CHECK(y[n] == options.ignore_index || (y[n] >= 0 && y[n] < C),
             "cross_entropy: target {} at position {} is outside [0, {}) for logits of shape {}",
             y[n], n, C, logits.shape());
  }
  return run_op(op_name("cross_entropy"), &FastOps::cross_entropy, cross_entropy_reference, logits,
                targets, options);
}

}  // namespace tapegrad
