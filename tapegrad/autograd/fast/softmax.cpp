// The fast room's softmax, log_softmax and masked_softmax (ops/softmax.cpp): a contiguous
// tensor viewed as rows along the softmax dim (detail::Rows), the row kernels of
// softmax_kernels.h split between threads; each records the derivative ops/softmax.cpp states,
// with its kernel beside it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tapegrad/autograd/fast/fast_room.h"
#include "tapegrad/autograd/fast/softmax_kernels.h"
#include "tapegrad/autograd/fast/vmath.h"
#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/strided.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/autograd/threads.h"
#include "tapegrad/profile/profile.h"

namespace tapegrad {

using detail::masked_softmax_forward;
using detail::Rows;
using detail::softmax_backward_rows;
using detail::softmax_forward;

namespace {

Rows rows_of(const char* op, const Tensor& x, int64_t dim) {
  const int64_t d = normalize_dim(op, dim, x.dim());
  Rows r{1, x.shape()[d], 1};
  for (int64_t i = 0; i < d; ++i) r.outer *= x.shape()[i];
  for (int64_t i = d + 1; i < x.dim(); ++i) r.inner *= x.shape()[i];
  return r;
}

}  // namespace

Tensor fast_softmax(const char* op, const Tensor& input, int64_t dim, bool log) {
  const Tensor x = input.contiguous();
  const Rows r = rows_of(op, x, dim);
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_floating(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    parallel_for(r.outer, grain_of_items(r.D * r.inner),
                 [&, pi = x.data<T>(), po = out.data<T>()](int64_t b, int64_t e) {
                   if (r.inner == 1) {
                     softmax_forward<T, true>(po, pi, r, log, b, e);
                   } else {
                     softmax_forward<T, false>(po, pi, r, log, b, e);
                   }
                 });
  });
  if (recording(x)) {
    record(op, {x}, out,
           {.backward = softmax_backward(out.detach(), dim, log),
            .fast =
                [y = out.detach(), r, log, op](const Tensor& dout, Grads& g) {
                  dispatch_floating(op, dout.dtype(), [&](auto tag) {
                    using T = decltype(tag);
                    const auto [grad, first] = g.write(0, Writes::Every);
                    assign_or_add(first, [&, dx = grad.data<T>(), dy = dout.data<T>(),
                                          py = y.data<T>()](auto store) {
                      parallel_for(r.outer, grain_of_items(r.D * r.inner),
                                   [&](int64_t b, int64_t e) {
                                     softmax_backward_rows<T>(store, dx, dy, py, r, log, b, e);
                                   });
                    });
                  });
                }},
           {{"y", out}});
  }
  return out;
}

Tensor fast_masked_softmax(const Tensor& input, const Tensor& mask) {
  const Tensor x = input.contiguous();
  const Rows r = rows_of("masked_softmax", x, -1);
  // Where each row's mask starts, and its step along the row (0 when broadcast along it).
  const Shape sm = broadcast_strides(mask.shape(), mask.strides(), x.shape());
  const Shape rows_shape(x.shape().begin(), x.shape().end() - 1);
  const Shape rows_strides(sm.begin(), sm.end() - 1);
  std::vector<int64_t> row_start;
  row_start.reserve(r.outer);
  for_each_offset<1>(rows_shape, {&rows_strides},
                     [&](const auto& o) { row_start.push_back(o[0]); });
  const int64_t col = sm.back();
  const uint8_t* pm = mask_bytes(mask);
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_floating("masked_softmax", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    parallel_for(r.outer, grain_of_items(r.D), [&](int64_t b, int64_t e) {
      masked_softmax_forward<T>(po, px, pm, row_start.data(), col, r.D, T{1}, b, e);
    });
  });
  if (recording(x)) {
    // The backward is softmax's: a blocked position has y = 0, so it gets no gradient.
    record(op_name("masked_softmax"), {x}, out,
           {.backward = softmax_backward(out.detach(), -1, false),
            .fast =
                [y = out.detach(), r](const Tensor& dout, Grads& g) {
                  dispatch_floating("masked_softmax", dout.dtype(), [&](auto tag) {
                    using T = decltype(tag);
                    const auto [grad, first] = g.write(0, Writes::Every);
                    assign_or_add(first, [&, dx = grad.data<T>(), dy = dout.data<T>(),
                                          py = y.data<T>()](auto store) {
                      parallel_for(r.outer, grain_of_items(r.D), [&](int64_t b, int64_t e) {
                        softmax_backward_rows<T>(store, dx, dy, py, r, false, b, e);
                      });
                    });
                  });
                }},
           {{"y", out}});
  }
  return out;
}

}  // namespace tapegrad
