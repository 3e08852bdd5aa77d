// LayerNorm as fused kernels (after llm.c's layernorm_forward/backward). The forward saves
// the per-row mean and rstd = 1 / sqrt(var + eps); backward needs nothing else. Backward is
// two kernels so each splits between threads without sharing a sum: the input's gradient by
// rows, the weight's and bias's by columns.
//
// Glossary: N rows (all leading dims flattened), C features per row.
#include "tapegrad/autograd/ops/layernorm.h"

#include <cmath>

#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/profile.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/autograd/threads.h"
#include "tapegrad/autograd/vmath.h"

namespace tapegrad {

namespace {

// inp (N,C), weight (C) or null, bias (C) or null -> out (N,C), mean (N), rstd (N)
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                       int64_t N, int64_t C, double eps) {
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    const T m = lane_sum(x, C) / static_cast<T>(C);
    const T v = lane_sum_of<T>(C, [&](int64_t c) { return (x[c] - m) * (x[c] - m); });
    const T s =
        static_cast<T>(1 / std::sqrt(static_cast<double>(v) / static_cast<double>(C) + eps));
    T* y = out + n * C;
    for (int64_t c = 0; c < C; ++c) {
      T norm = (x[c] - m) * s;
      if (weight) norm *= weight[c];
      if (bias) norm += bias[c];
      y[c] = norm;
    }
    mean[n] = m;
    rstd[n] = s;
  }
}

// With xhat = (x - mean) * rstd and y = xhat * w + b:
//   dx      += rstd * (dxhat - mean_c(dxhat) - xhat * mean_c(dxhat * xhat)),  dxhat = dy * w
// The dx line is d/dx of xhat through both the mean and the variance (llm.c derives it).
// dout, inp (N,C), weight (C) or null, mean, rstd (N) -> dinp (N,C), stored by `store`
// (assign_or_add)
template <class T, class Store>
void layernorm_backward_input(Store store, T* dinp, const T* dout, const T* inp, const T* weight,
                              const T* mean, const T* rstd, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const T* dy = dout + n * C;
    const T* x = inp + n * C;
    const T m = mean[n], s = rstd[n];
    auto dxhat = [&](int64_t c) { return weight ? dy[c] * weight[c] : dy[c]; };
    const T dnorm_mean = lane_sum_of<T>(C, dxhat) / static_cast<T>(C);
    const T dnorm_norm_mean =
        lane_sum_of<T>(C, [&](int64_t c) { return dxhat(c) * (x[c] - m) * s; }) / static_cast<T>(C);
    for (int64_t c = 0; c < C; ++c) {
      const T xhat = (x[c] - m) * s;
      store(dinp[n * C + c], s * (dxhat(c) - dnorm_mean - xhat * dnorm_norm_mean));
    }
  }
}

//   dbias   += sum_n dy
//   dweight += sum_n dy * xhat
// for the columns c0..c1, summed over the rows in order (so a column's sum never depends on
// how the columns are split between threads).
// dout, inp (N,C), mean, rstd (N) -> dweight (C) or null, dbias (C) or null
template <class T>
void layernorm_backward_params(T* dweight, T* dbias, const T* dout, const T* inp, const T* mean,
                               const T* rstd, int64_t N, int64_t C, int64_t c0, int64_t c1) {
  for (int64_t n = 0; n < N; ++n) {
    const T* dy = dout + n * C;
    const T* x = inp + n * C;
    const T m = mean[n], s = rstd[n];
    for (int64_t c = c0; c < c1; ++c) {
      if (dbias) dbias[c] += dy[c];
      if (dweight) dweight[c] += dy[c] * (x[c] - m) * s;
    }
  }
}

}  // namespace

Tensor layer_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, double eps) {
  const profile::Scope profile_scope("layer_norm");
  TG_CHECK(input.dim() >= 1, "layer_norm: input must have rank >= 1, got shape {}", input.shape());
  TG_CHECK(eps > 0, "layer_norm: eps must be positive, got {}", eps);
  const int64_t C = input.size(-1);
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    TG_CHECK(p->shape() == Shape{C}, "layer_norm: {} has shape {}, expected [{}] for input {}",
             p == &weight ? "weight" : "bias", p->shape(), C, input.shape());
    TG_CHECK(p->dtype() == input.dtype(), "layer_norm: dtypes differ: input {} and {} {}",
             input.dtype(), p == &weight ? "weight" : "bias", p->dtype());
  }
  const Tensor x = input.contiguous();
  const Tensor w = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  const int64_t N = C == 0 ? 0 : x.numel() / C;
  Tensor out = empty(x.shape(), x.dtype());
  Tensor mean = empty({N}, x.dtype()), rstd = empty({N}, x.dtype());
  dispatch_floating("layer_norm", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T *po = out.data<T>(), *pm = mean.data<T>(), *ps = rstd.data<T>();
    const T* px = x.data<T>();
    const T* pw = w.defined() ? w.data<T>() : nullptr;
    const T* pb = b.defined() ? b.data<T>() : nullptr;
    parallel_for(N, grain_of_items(C), [&](int64_t n0, int64_t n1) {
      layernorm_forward<T>(po + n0 * C, pm + n0, ps + n0, px + n0 * C, pw, pb, n1 - n0, C, eps);
    });
  });
  const bool with_w = w.defined(), with_b = b.defined();
  std::vector<Tensor> inputs{x};
  if (with_w) inputs.push_back(w);
  if (with_b) inputs.push_back(b);
  if (recording(inputs)) {
    record(
        "layer_norm", inputs, out,
        [x = x.detach(), w = with_w ? w.detach() : Tensor(), mean, rstd, with_w, with_b, N, C](
            const Tensor& dout, Grads& g) {
          dispatch_floating("layer_norm", dout.dtype(), [&](auto tag) {
            using T = decltype(tag);
            const size_t iw = 1, ib = with_w ? 2 : 1;
            T* dw = with_w && g.wants(iw) ? g.write(iw, Writes::Some).grad.data<T>() : nullptr;
            T* db = with_b && g.wants(ib) ? g.write(ib, Writes::Some).grad.data<T>() : nullptr;
            const T *dy = dout.data<T>(), *px = x.data<T>(), *pm = mean.data<T>(),
                    *ps = rstd.data<T>();
            const T* pw = with_w ? w.data<T>() : nullptr;
            if (g.wants(0)) {
              const auto [grad, first] = g.write(0, Writes::Every);
              assign_or_add(first, [&, dx = grad.data<T>()](auto store) {
                parallel_for(N, grain_of_items(C), [&](int64_t n0, int64_t n1) {
                  layernorm_backward_input<T>(store, dx + n0 * C, dy + n0 * C, px + n0 * C, pw,
                                              pm + n0, ps + n0, n1 - n0, C);
                });
              });
            }
            if (dw || db) {
              parallel_for(C, grain_of_items(N), [&](int64_t c0, int64_t c1) {
                layernorm_backward_params<T>(dw, db, dy, px, pm, ps, N, C, c0, c1);
              });
            }
          });
        },
        [x, w, with_w, with_b, eps, C](const Tensor& dout, Grads& g) {
          // xhat = (x - mean) * rstd, rstd = (var + eps)^(-1/2), recomputed from x; then
          //   dxhat = dout * w
          //   dx = rstd * (dxhat - tapegrad::mean(dxhat) - xhat * tapegrad::mean(dxhat * xhat))
          //   (row means) dw = sum over rows of dout * xhat, db = sum over rows of dout
          const Tensor xc = sub(x, tapegrad::mean(x, {-1}, true));
          const Tensor rstd = pow(add(tapegrad::mean(mul(xc, xc), {-1}, true), eps), -0.5);
          const Tensor xhat = mul(xc, rstd);
          if (g.wants(0)) {
            const Tensor dxhat = with_w ? mul(dout, w) : dout;
            g.pass(0, mul(rstd, sub(sub(dxhat, tapegrad::mean(dxhat, {-1}, true)),
                                    mul(xhat, tapegrad::mean(mul(dxhat, xhat), {-1}, true)))));
          }
          const size_t iw = 1, ib = with_w ? 2 : 1;
          if (with_w && g.wants(iw)) g.pass(iw, sum_to(mul(dout, xhat), {C}));
          if (with_b && g.wants(ib)) g.pass(ib, sum_to(dout, {C}));
        });
    if (tape_details()) {
      std::vector<SavedBuffer> saved{{"x", x}, {"mean", mean}, {"rstd", rstd}};
      if (with_w) saved.emplace_back("w", w);
      note_saved(out, std::move(saved));
    }
  }
  return out;
}

}  // namespace tapegrad
