// Embedding: the forward is a gather of rows, the backward the matching scatter-add.
//
// Glossary: V vocabulary size, C embedding width, N ids (all dims of ids flattened).
#include "tapegrad/autograd/ops/embedding.h"

#include <algorithm>

#include "tapegrad/autograd/ops/matmul.h"
#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/autograd/profile.h"
#include "tapegrad/autograd/tape.h"

namespace tapegrad {

namespace {

// weight (V,C), ids (N) -> out (N,C)
template <class T>
void embedding_forward(T* out, const T* weight, const int64_t* ids, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) std::copy_n(weight + ids[n] * C, C, out + n * C);
}

// dweight[ids[n]] += dout[n] for every n whose id is not the padding id. Repeated ids add up.
template <class T>
void embedding_backward(T* dweight, const T* dout, const int64_t* ids, int64_t N, int64_t C,
                        int64_t padding_idx) {
  for (int64_t n = 0; n < N; ++n) {
    if (ids[n] == padding_idx) continue;
    T* row = dweight + ids[n] * C;
    const T* d = dout + n * C;
    for (int64_t c = 0; c < C; ++c) row[c] += d[c];
  }
}

}  // namespace

Tensor embedding(const Tensor& weight_in, const Tensor& ids_in,
                 std::optional<int64_t> padding_idx) {
  const profile::Scope profile_scope("embedding");
  TG_CHECK(weight_in.dim() == 2, "embedding: weight must be [V, C], got shape {}",
           weight_in.shape());
  TG_CHECK(ids_in.dtype() == DType::Int64, "embedding: ids must be int64, got {} of shape {}",
           ids_in.dtype(), ids_in.shape());
  const int64_t V = weight_in.size(0), C = weight_in.size(1);
  TG_CHECK(!padding_idx || (*padding_idx >= 0 && *padding_idx < V),
           "embedding: padding_idx {} out of range for a vocabulary of {}", *padding_idx, V);
  const Tensor weight = weight_in.contiguous();
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
  Tensor out = empty(shape, weight.dtype());
  dispatch_floating("embedding", weight.dtype(), [&](auto tag) {
    using T = decltype(tag);
    embedding_forward<T>(out.data<T>(), weight.data<T>(), pid, N, C);
  });
  if (recording(weight)) {
    record("embedding", {weight}, out,
           {.backward =
                [ids, N, C, V, pad = padding_idx.value_or(-1)](const Tensor& dout, Grads& g) {
                  // dweight = onehot(ids)^T dout, [V, N] @ [N, C]: row n of dout added into row
                  // ids[n], padding rows left out; the scatter as a product, differentiable in dout
                  Tensor onehot = zeros({N, V}, dout.dtype());
                  dispatch_floating("embedding", dout.dtype(), [&](auto tag) {
                    using T = decltype(tag);
                    const int64_t* pid = ids.data<int64_t>();
                    for (int64_t n = 0; n < N; ++n) {
                      if (pid[n] != pad) onehot.data<T>()[n * V + pid[n]] = T{1};
                    }
                  });
                  g.pass(0, matmul(transpose(onehot, 0, 1), reshape(dout, {N, C})));
                },
            .fast =
                [ids, N, C, pad = padding_idx.value_or(-1)](const Tensor& dout, Grads& g) {
                  dispatch_floating("embedding", dout.dtype(), [&](auto tag) {
                    using T = decltype(tag);
                    embedding_backward<T>(g.write(0, Writes::Some).grad.data<T>(), dout.data<T>(),
                                          ids.data<int64_t>(), N, C, pad);
                  });
                }},
           {{"ids", ids}});
  }
  return out;
}

}  // namespace tapegrad
