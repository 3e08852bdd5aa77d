// Multi-head attention (Vaswani et al. 2017, section 3.2) and its masks.
//
// Mask convention, as PyTorch's boolean masks: TRUE MEANS BLOCKED. A true entry is a position
// that may not be attended to; its score is set to -inf before the softmax, so it gets exactly
// zero weight. A query row whose every key is blocked gets all-zero weights (not NaN).
//   key_padding_mask  bool [B, S]: true at the padding positions of each key sequence.
//   attn_mask         bool [T, S], or anything broadcastable to [B, H, T, S]: e.g. causal_mask.
//
// Glossary: B batch, T query length, S key/value length, C model width, H heads, D = C / H.
#pragma once

#include "tapegrad/nn/layers.h"

namespace tapegrad::nn {

// [T, T], true above the diagonal: position t may attend to positions <= t only.
Tensor causal_mask(int64_t T);
// ids [B, S] -> bool [B, S], true where ids == pad_id.
Tensor padding_mask(const Tensor& ids, int64_t pad_id);

struct AttentionMasks {
  Tensor key_padding{};  // bool [B, S] or undefined
  Tensor attn{};         // bool broadcastable to [B, H, T, S] or undefined
};

class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t C, int64_t heads, double dropout, Generator& gen);

  // query [B, T, C], key and value [B, S, C] -> [B, T, C].
  // Self-attention passes the same tensor three times; cross-attention passes the encoder
  // memory as key and value.
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const AttentionMasks& masks = {});

  // Incremental decoding keeps the projected keys and values [B, S, C] of what a query
  // attends to, so that a step projects only its new position (inference only).
  struct KVCache {
    Tensor keys, values;  // [B, capacity, C]; the first `length` positions are in use
    int64_t length = 0;
  };
  // key_value [B, S, C] -> its projected keys and values, for cross-attention over a memory.
  KVCache project(const Tensor& key_value);
  // An empty cache for self-attention over up to `capacity` positions, allocated once: a step
  // writes its position in place, and attention reads the cache where it is.
  KVCache empty_cache(int64_t batch, int64_t capacity, DType dtype) const;
  // query [B, T, C] attends to the cached keys and values. With `append` (self-attention) the
  // query's own keys and values join the cache first, so it attends to every position so far,
  // itself included, and needs no causal mask. masks.key_padding covers the positions in use.
  Tensor forward_cached(const Tensor& query, KVCache& cache, bool append,
                        const AttentionMasks& masks = {});

  // When on, forward keeps its attention weights [B, H, T, S] (detached) for plotting.
  void keep_weights(bool on) { keep_weights_ = on; }
  const Tensor& last_weights() const { return last_weights_; }
  int64_t heads() const { return H_; }

  Child<Linear> q_proj, k_proj, v_proj, out_proj;

 private:
  // softmax(q k^T / sqrt(D), blocked) v for projected q [B, T, C], k and v [B, S, C], then the
  // output projection: what forward and forward_cached share
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMasks& masks);

  int64_t C_, H_;
  Child<Dropout> dropout_;
  bool keep_weights_ = false;
  Tensor last_weights_;
};

}  // namespace tapegrad::nn
