// Masks (causal, padding) and multi-head attention: the full forward, and the cached forward
// of incremental decoding, which writes each step's keys and values into a buffer in place.
#include "tapegrad/nn/multi_head_attention.h"

#include <cstring>

#include "tapegrad/autograd/ops/attention.h"
#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/autograd/tape.h"

namespace tapegrad::nn {

Tensor causal_mask(int64_t T) {
  Tensor m = zeros({T, T}, DType::Bool);
  bool* p = m.data<bool>();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t s = t + 1; s < T; ++s) p[t * T + s] = true;
  }
  return m;
}

Tensor padding_mask(const Tensor& ids, int64_t pad_id) {
  TG_CHECK(ids.dtype() == DType::Int64 && ids.dim() == 2,
           "padding_mask: expected int64 ids [B, S], got {} {}", ids.dtype(), ids.shape());
  return eq(ids, static_cast<double>(pad_id));
}

MultiHeadAttention::MultiHeadAttention(int64_t C, int64_t heads, double dropout, Generator& gen)
    : Module("MultiHeadAttention"), C_(C), H_(heads) {
  TG_CHECK(heads > 0 && C > 0 && C % heads == 0,
           "MultiHeadAttention: d_model {} is not divisible by {} heads", C, heads);
  q_proj = register_module("q_proj", std::make_shared<Linear>(C, C, gen));
  k_proj = register_module("k_proj", std::make_shared<Linear>(C, C, gen));
  v_proj = register_module("v_proj", std::make_shared<Linear>(C, C, gen));
  out_proj = register_module("out_proj", std::make_shared<Linear>(C, C, gen));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(dropout, gen));
}

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const AttentionMasks& masks) {
  TG_CHECK(query.dim() == 3 && query.size(2) == C_,
           "MultiHeadAttention: query must be [B, T, {}], got {}", C_, query.shape());
  TG_CHECK(key.dim() == 3 && key.shape() == value.shape() && key.size(0) == query.size(0) &&
               key.size(2) == C_,
           "MultiHeadAttention: key {} and value {} must be [B, S, {}] with B = {}", key.shape(),
           value.shape(), C_, query.size(0));
  // in order (function arguments are evaluated in an unspecified one): the shape trace and the
  // tape list q, k, v as written
  const Tensor q = q_proj(query);
  const Tensor k = k_proj(key);
  const Tensor v = v_proj(value);
  return attend(q, k, v, masks);
}

MultiHeadAttention::KVCache MultiHeadAttention::project(const Tensor& key_value) {
  TG_CHECK(key_value.dim() == 3 && key_value.size(2) == C_,
           "MultiHeadAttention: key and value must be [B, S, {}], got {}", C_, key_value.shape());
  return {k_proj(key_value), v_proj(key_value), key_value.size(1)};
}

MultiHeadAttention::KVCache MultiHeadAttention::empty_cache(int64_t batch, int64_t capacity,
                                                            DType dtype) const {
  return {empty({batch, capacity, C_}, dtype), empty({batch, capacity, C_}, dtype), 0};
}

namespace {
// buffer[:, at : at + T] = rows (buffer packed [B, capacity, C], rows [B, T, C]); an in-place
// write, not recorded
void write_rows(Tensor& buffer, int64_t at, const Tensor& rows) {
  const Tensor r = rows.contiguous();
  const int64_t B = r.size(0), T = r.size(1), C = r.size(2), capacity = buffer.size(1);
  const size_t bytes = dtype_size(r.dtype());
  buffer.impl().storage->bump_version();
  auto* dst = static_cast<char*>(buffer.impl().storage->data()) + buffer.offset() * bytes;
  const auto* src = static_cast<const char*>(r.impl().storage->data()) + r.offset() * bytes;
  for (int64_t b = 0; b < B; ++b) {
    std::memcpy(dst + ((b * capacity + at) * C) * bytes, src + b * T * C * bytes, T * C * bytes);
  }
}
}  // namespace

Tensor MultiHeadAttention::forward_cached(const Tensor& query, KVCache& cache, bool append,
                                          const AttentionMasks& masks) {
  TG_CHECK(query.dim() == 3 && query.size(2) == C_,
           "MultiHeadAttention: query must be [B, T, {}], got {}", C_, query.shape());
  TG_CHECK(cache.keys.defined() && cache.keys.size(0) == query.size(0),
           "MultiHeadAttention: the cache holds {} rows for a query of {}",
           cache.keys.defined() ? cache.keys.size(0) : 0, query.size(0));
  if (append) {
    TG_CHECK(!recording(query) && cache.length + query.size(1) <= cache.keys.size(1),
             "MultiHeadAttention: a cache of {} positions, {} in use, cannot take {} more (or "
             "the query requires grad: the cache is for inference)",
             cache.keys.size(1), cache.length, query.size(1));
    const KVCache fresh = project(query);
    write_rows(cache.keys, cache.length, fresh.keys);
    write_rows(cache.values, cache.length, fresh.values);
    cache.length += query.size(1);
  }
  return attend(q_proj(query), slice(cache.keys, 1, 0, cache.length),
                slice(cache.values, 1, 0, cache.length), masks);
}

Tensor MultiHeadAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const AttentionMasks& masks) {
  const int64_t B = q.size(0), T = q.size(1), S = k.size(1);
  // blocked = padding | attn, broadcast only as far as the masks need (e.g. [B, 1, 1, S])
  Tensor blocked;
  if (masks.key_padding.defined()) {
    TG_CHECK(masks.key_padding.shape() == Shape({B, S}) && masks.key_padding.dtype() == DType::Bool,
             "MultiHeadAttention: key_padding mask {} {} must be bool [B, S] = [{}, {}]",
             masks.key_padding.dtype(), masks.key_padding.shape(), B, S);
    blocked = reshape(masks.key_padding, {B, 1, 1, S});
  }
  if (masks.attn.defined()) {
    TG_CHECK(masks.attn.dtype() == DType::Bool,
             "MultiHeadAttention: attn mask must be bool, got {}", masks.attn.dtype());
    const Shape scores{B, H_, T, S};
    TG_CHECK(broadcast_shapes("MultiHeadAttention", masks.attn.shape(), scores) == scores,
             "MultiHeadAttention: attn mask {} does not broadcast to the scores [B, H, T, S] = {}",
             masks.attn.shape(), scores);
    blocked = blocked.defined() ? logical_or(blocked, masks.attn) : masks.attn;
  }
  // per head: softmax(q k^T / sqrt(D), blocked -> -inf), dropout, @ v; heads are D-wide column
  // groups of the projections, so splitting and merging them moves no data (autograd attention)
  if (tracing()) [[unlikely]] {  // the fused op's steps, as the seed notebooks print them
    const int64_t D = C_ / H_;
    trace_shape("q, per head", {B, H_, T, D});
    trace_shape("k and v, per head", {B, H_, S, D});
    trace_shape("scores q k^T / sqrt(D)", {B, H_, T, S});
    if (blocked.defined()) trace_shape("mask, broadcast to the scores", blocked.shape());
    trace_shape("weights softmax(scores)", {B, H_, T, S});
    trace_shape("values weights @ v, per head", {B, H_, T, D});
    trace_shape("values, heads merged", {B, T, C_});
  }
  Tensor weights;
  const Tensor ctx = attention(q, k, v, H_, {.blocked = blocked, .dropout = dropout_->options()},
                               keep_weights_ ? &weights : nullptr);
  if (keep_weights_) last_weights_ = weights;
  return out_proj(ctx);
}

}  // namespace tapegrad::nn
