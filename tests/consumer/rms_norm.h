// A user's own op, written against tapegrad's public tape API alone (docs/custom_ops.md walks
// through it): RMSNorm (Zhang and Sennrich 2019), fused, with its own forward and backward
// kernels. Over the last dim of x [..., C], with r = 1 / sqrt(mean(x^2) + eps):
//   y  = x * r * w
//   dw += sum over rows of dy * x * r
//   dx += r * (dxh - x * r * mean(dxh * x * r)),   dxh = dy * w
// The dx line is d/dx of x * r through r's dependence on every element of the row, as for
// layer norm without the mean.
#pragma once

#include <tapegrad/autograd/autograd.h>

#include <cmath>
#include <vector>

namespace my {

inline tapegrad::Tensor rms_norm(const tapegrad::Tensor& x_in, const tapegrad::Tensor& w_in,
                                 double eps = 1e-6) {
  using namespace tapegrad;
  // 1. check the inputs: the error names the op and the shapes, as tapegrad's own ops do
  TG_CHECK(x_in.dim() >= 1 && w_in.dim() == 1 && w_in.size(0) == x_in.size(-1),
           "rms_norm: weight must be [{}] for input {}, got {}", x_in.size(-1), x_in.shape(),
           w_in.shape());
  TG_CHECK(x_in.dtype() == DType::Float64 && w_in.dtype() == DType::Float64,
           "rms_norm: this example op is written for float64, got {} and {}", x_in.dtype(),
           w_in.dtype());
  // 2. forward kernel on contiguous buffers; keep what backward needs (r per row)
  const Tensor x = x_in.contiguous(), w = w_in.contiguous();
  const int64_t C = x.size(-1), N = x.numel() / C;
  Tensor y = empty(x.shape(), DType::Float64);
  auto r = std::make_shared<std::vector<double>>(N);
  const double *px = x.data<double>(), *pw = w.data<double>();
  double* py = y.data<double>();
  for (int64_t n = 0; n < N; ++n) {
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += px[n * C + c] * px[n * C + c];
    (*r)[n] = 1 / std::sqrt(ss / static_cast<double>(C) + eps);
    for (int64_t c = 0; c < C; ++c) py[n * C + c] = px[n * C + c] * (*r)[n] * pw[c];
  }
  // 3. record the backward when anything requires grad; save inputs detached (by value)
  if (recording(x, w)) {
    record("rms_norm", {x, w}, y,
           {.backward = [x = x.detach(), w = w.detach(), r, N, C](const Tensor& dout, Grads& g) {
             const double *px = x.data<double>(), *pw = w.data<double>();
             const double* dy = dout.data<double>();
             if (g.wants(0)) {  // dx: every element written once, assigned by a first writer
               const auto [grad, first] = g.write(0, Writes::Every);
               double* dx = grad.data<double>();
               assign_or_add(first, [&](auto store) {
                 for (int64_t n = 0; n < N; ++n) {
                   const double rn = (*r)[n];
                   double dot = 0;
                   for (int64_t c = 0; c < C; ++c)
                     dot += dy[n * C + c] * pw[c] * px[n * C + c] * rn;
                   dot /= static_cast<double>(C);
                   for (int64_t c = 0; c < C; ++c) {
                     const double xh = px[n * C + c] * rn;
                     store(dx[n * C + c], rn * (dy[n * C + c] * pw[c] - xh * dot));
                   }
                 }
               });
             }
             if (g.wants(1)) {  // dw: a sum over rows, added into a zero-filled buffer
               double* dw = g.write(1, Writes::Some).grad.data<double>();
               for (int64_t n = 0; n < N; ++n) {
                 for (int64_t c = 0; c < C; ++c) dw[c] += dy[n * C + c] * px[n * C + c] * (*r)[n];
               }
             }
           }});
    // what the entry keeps, for the tape's drawing (viz::TapeDrawing)
    if (tape_details()) {
      note_saved(y, {{"x", x.shape(), x.dtype()},
                     {"w", w.shape(), w.dtype()},
                     {"rstd", Shape{N}, DType::Float64}});
    }
  }
  return y;
}

}  // namespace my
