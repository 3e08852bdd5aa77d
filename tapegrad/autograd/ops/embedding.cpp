// Embedding: the forward is a gather of rows, the backward the matching scatter-add, and each
// is the other's derivative, so the one pair serves every order.
//
// Glossary: V vocabulary size, C embedding width, N ids (all dims of ids flattened).
#include "tapegrad/autograd/ops/embedding.h"

#include <algorithm>

#include "tapegrad/autograd/ops/registry.h"
#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/autograd/tape.h"

namespace tapegrad {

namespace {

Tensor gather_rows(const Tensor& src, const Tensor& ids, int64_t skip, int64_t grad_skip);

// src [N, C], ids [N] -> out [V, C]: out[v] = the sum of the rows src[n] with ids[n] == v,
// leaving out the n with ids[n] == skip. Its derivative is the gather of the same rows.
Tensor scatter_rows(const Tensor& src, const Tensor& ids, int64_t V, int64_t skip) {
  return run_op(op_name("embedding_backward"), [&] {
    const int64_t N = src.size(0), C = src.size(1);
    Tensor out = zeros({V, C}, src.dtype());
    dispatch_floating("embedding_backward", src.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const int64_t* pid = ids.data<int64_t>();
      const T* ps = src.data<T>();
      T* po = out.data<T>();
      for (int64_t n = 0; n < N; ++n) {
        if (pid[n] == skip) continue;
        std::transform(ps + n * C, ps + (n + 1) * C, po + pid[n] * C, po + pid[n] * C,
                       std::plus<T>());
      }
    });
    if (!recording(src)) return out;
    return record(
        op_name("embedding_backward"), {src}, out,
        {.backward = [ids, skip](const Tensor& dout,
                                 Grads& g) { g.pass(0, gather_rows(dout, ids, skip, skip)); }},
        {{"ids", ids}});
  });
}

// src [V, C], ids [N] -> out [N, C]: out[n] = src[ids[n]], 0 where ids[n] == skip. Its
// derivative is the scatter-add of dout into the rows, leaving out the ids equal to grad_skip.
Tensor gather_rows(const Tensor& src_in, const Tensor& ids, int64_t skip, int64_t grad_skip) {
  return run_op(op_name("embedding"), [&] {
    const Tensor src = src_in.contiguous();
    const int64_t N = ids.numel(), V = src.size(0), C = src.size(1);
    Tensor out = zeros({N, C}, src.dtype());
    dispatch_floating(op_name("embedding"), src.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const int64_t* pid = ids.data<int64_t>();
      const T* ps = src.data<T>();
      T* po = out.data<T>();
      for (int64_t n = 0; n < N; ++n) {
        if (pid[n] != skip) std::copy_n(ps + pid[n] * C, C, po + n * C);
      }
    });
    if (!recording(src)) return out;
    return record(op_name("embedding"), {src}, out,
                  {.backward =
                       [ids, V, grad_skip](const Tensor& dout, Grads& g) {
                         g.pass(0, scatter_rows(dout.contiguous(), ids, V, grad_skip));
                       }},
                  {{"ids", ids}});
  });
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids_in, std::optional<int64_t> padding_idx) {
  TG_CHECK(weight.dim() == 2, "embedding: weight must be [V, C], got shape {}", weight.shape());
  TG_CHECK(ids_in.dtype() == DType::Int64, "embedding: ids must be int64, got {} of shape {}",
           ids_in.dtype(), ids_in.shape());
  const int64_t V = weight.size(0), C = weight.size(1);
  TG_CHECK(!padding_idx || (*padding_idx >= 0 && *padding_idx < V),
           "embedding: padding_idx {} out of range for a vocabulary of {}", *padding_idx, V);
  const Tensor ids = ids_in.contiguous();
  const int64_t N = ids.numel();
  const int64_t* pid = ids.data<int64_t>();
  for (int64_t n = 0; n < N; ++n) {
    TG_CHECK(pid[n] >= 0 && pid[n] < V,
             "embedding: id {} at flat position {} of ids {} is outside the vocabulary [0, {})",
             pid[n], n, ids.shape(), V);
  }
  Shape shape = ids.shape();
  shape.push_back(C);
  // every row looked up; the padding row's gradient left out
  return reshape(gather_rows(weight, ids, -1, padding_idx.value_or(-1)), shape);
}

}  // namespace tapegrad
