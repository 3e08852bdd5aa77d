// Scaled dot-product attention over heads (Vaswani et al. 2017, eq. 1), as one fused op like
// PyTorch's scaled_dot_product_attention. For each batch item b and head h:
//
//   weights_bh = softmax(q_bh k_bh^T / sqrt(D), blocked positions -> -inf)     [T, S]
//   out_bh     = dropout(weights_bh) v_bh                                       [T, D]
//
// where q_bh is head h's D columns of q[b]: q [B, T, H*D], k and v [B, S, H*D], out [B, T, H*D].
// Heads are column groups of the last dim, so the projections' outputs go in and the merged
// context comes out with no copies to split or merge heads. Each (b, h) runs on its own: its
// [T, S] scores stay in cache from the first product through the softmax and dropout to the
// second, where the unfused ops write and read back four [B, H, T, S] tensors. The backward
// keeps only the weights and recomputes the dropout mask from its key.
//
// nn::MultiHeadAttention (tapegrad/nn/multi_head_attention.h) builds the masks and projections
// around it.
#pragma once

#include "tapegrad/autograd/ops/dropout.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

struct AttentionOptions {
  // bool, broadcastable to [B, H, T, S], true where a query may not attend to a key (PyTorch's
  // convention); undefined for none. A query row with every key blocked gets zero weights.
  Tensor blocked{};
  DropoutOptions dropout{};  // on the weights
};

// q [B, T, C], k and v [B, S, C] -> [B, T, C], with C = heads * D. When `weights` is given it
// receives the softmax weights [B, H, T, S] (before dropout, not recorded), for plotting: a
// strided view of the op's own [B, H, S, T] buffer (padded), which at() and the ops read.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                 const AttentionOptions& options = {}, Tensor* weights = nullptr);

// The definition in primitives, which the fused kernel is tested equal to and create_graph
// differentiates: softmax(q k^T / sqrt(D), blocked -> -inf) per head, dropout(p, key) on the
// weights (the mask of one generator draw, `key`; p = 0: none), times v, through [B, H, T, S]
// tensors. Shapes are checked by the ops it calls. `weights` as attention's.
Tensor attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                           const Tensor& blocked = {}, double p = 0, uint64_t key = 0,
                           Tensor* weights = nullptr);

}  // namespace tapegrad
