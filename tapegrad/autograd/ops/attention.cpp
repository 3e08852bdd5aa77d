// Scaled dot-product attention as its definition in primitives, per head:
// softmax(mask(q k^T / sqrt(D))) v, with dropout on the weights. Its gradients of every order
// come from differentiating this. The fused kernel that computes the same faster is the fast
// room's (fast/attention.cpp).
#include "tapegrad/autograd/ops/attention.h"

#include <cmath>

#include "tapegrad/autograd/ops/dropout.h"
#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/matmul.h"
#include "tapegrad/autograd/ops/registry.h"
#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/autograd/ops/softmax.h"

namespace tapegrad {

namespace {

// attention's checks; the dropout that applies, its mask's key drawn.
DropoutDraw check_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                            const AttentionOptions& options) {
  TG_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3,
           "attention: q, k and v must be [B, T, C], [B, S, C] and [B, S, C], got {}, {} and {}",
           q.shape(), k.shape(), v.shape());
  const int64_t B = q.size(0), T = q.size(1), C = q.size(2), S = k.size(1);
  TG_CHECK(k.shape() == v.shape() && k.size(0) == B && k.size(2) == C,
           "attention: k {} and v {} must be [B, S, C] with B = {} and C = {} (q is {})", k.shape(),
           v.shape(), B, C, q.shape());
  TG_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(),
           "attention: dtypes differ: q {}, k {}, v {}", q.dtype(), k.dtype(), v.dtype());
  TG_CHECK(heads > 0 && C % heads == 0, "attention: {} heads do not divide C = {}", heads, C);
  if (const Tensor& blocked = options.blocked; blocked.defined()) {
    const Shape wshape{B, heads, T, S};
    TG_CHECK(blocked.dtype() == DType::Bool, "attention: blocked mask must be bool, got {}",
             blocked.dtype());
    TG_CHECK(broadcast_shapes("attention", blocked.shape(), wshape) == wshape,
             "attention: blocked mask {} does not broadcast to [B, H, T, S] = {}", blocked.shape(),
             wshape);
  }
  return draw_dropout("attention", options.dropout, "options.dropout");
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                 const AttentionOptions& options, Tensor* weights) {
  const auto [p, key] = check_attention(q, k, v, heads, options);
  return run_op(op_name("attention"), &FastOps::attention, attention_reference, q, k, v, heads,
                options.blocked, p, key, weights);
}

Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                           const Tensor& blocked, double p, uint64_t key, Tensor* weights) {
  const int64_t B = q.size(0), T = q.size(1), C = q.size(2), S = k.size(1), D = C / heads;
  auto split = [&](const Tensor& t, int64_t L) {
    return permute(reshape(t, {B, L, heads, D}), {0, 2, 1, 3});
  };
  const Tensor scores = matmul(split(q, T), transpose(split(k, S), -2, -1)) / std::sqrt(D * 1.0);
  const Tensor w = blocked.defined() ? masked_softmax(scores, blocked) : softmax(scores, -1);
  if (weights) *weights = w.detach();
  return reshape(permute(matmul(dropout(w, p, key), split(v, S)), {0, 2, 1, 3}), {B, T, C});
}

}  // namespace tapegrad
