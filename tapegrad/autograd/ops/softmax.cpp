// softmax, log_softmax and masked_softmax along one dim: a plain kernel over rows, each row
// shifted by its max before the exp, and one backward written in terms of the output y. The
// fast room's kernels compute the same faster (fast/softmax.cpp).
#include "tapegrad/autograd/ops/softmax.h"

#include <cmath>
#include <limits>

#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/ops/registry.h"
#include "tapegrad/autograd/strided.h"
#include "tapegrad/autograd/tape.h"

namespace tapegrad {

namespace {

// The backward of softmax and log_softmax in differentiable ops, from the output y:
//   softmax:      dx = y * (dout - sum(dout * y))      (sums along dim)
//   log_softmax:  dx = dout - exp(y) * sum(dout)
// A fully masked row (all -inf in) came out as zeros: softmax's formula gives it zero, but
// log_softmax's would give dout - sum(dout), so those rows (y sums to 0 only there, as every
// y <= 0) are zeroed explicitly, as the kernel does.
Tensor softmax_grad(const Tensor& dout, const Tensor& y, int64_t dim, bool log) {
  if (log) {
    const Tensor masked_rows = eq(sum(y.detach(), {dim}, true), 0);
    return masked_fill(sub(dout, mul(exp(y), sum(dout, {dim}, true))), masked_rows, 0.0);
  }
  return mul(y, sub(dout, sum(mul(dout, y), {dim}, true)));
}

// x -> y along dim, x contiguous: a row is the D elements x[o, :, i] of x viewed as
// (outer, D, inner). softmax: exp(x_j - max) / sum_k exp(x_k - max); log_softmax:
// x_j - max - log(sum_k exp(x_k - max)). A row that is -inf everywhere gives zeros; a row with
// a NaN or a +inf gives NaN (x - max is NaN somewhere, and so is the sum).
Tensor softmax_rows(const char* op, const Tensor& x, int64_t dim, bool log) {
  const int64_t d = normalize_dim(op, dim, x.dim());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.shape()[i];
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.shape()[i];
  const int64_t D = x.shape()[d];
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_floating(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* xr = x.data<T>() + o * D * inner + i;
        T* yr = out.data<T>() + o * D * inner + i;
        T max = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < D; ++j) max = std::max(max, xr[j * inner]);
        bool masked = max == -std::numeric_limits<T>::infinity();  // unless max skipped a NaN
        for (int64_t j = 0; masked && j < D; ++j) masked = !std::isnan(xr[j * inner]);
        T sum = 0;
        for (int64_t j = 0; j < D; ++j) sum += std::exp(xr[j * inner] - max);
        for (int64_t j = 0; j < D; ++j) {
          const T shifted = xr[j * inner] - max;
          yr[j * inner] = masked ? T{0} : log ? shifted - std::log(sum) : std::exp(shifted) / sum;
        }
      }
    }
  });
  return out;
}

// The plain paths: the kernel, and the op recorded with its derivative.
Tensor recorded_softmax(const char* op, const Tensor& x, int64_t dim, bool log) {
  Tensor out = softmax_rows(op, x.contiguous(), dim, log);
  if (!recording(x)) return out;
  return record(op, {x}, out, {.backward = softmax_backward(out.detach(), dim, log)}, {{"y", out}});
}

Tensor recorded_masked_softmax(const Tensor& input, const Tensor& mask) {
  const double kNegInf = -std::numeric_limits<double>::infinity();
  Tensor out =
      softmax_rows("masked_softmax", masked_fill(input.detach(), mask, kNegInf), -1, false);
  if (!recording(input)) return out;
  return record(op_name("masked_softmax"), {input}, out,
                {.backward = softmax_backward(out.detach(), -1, false)}, {{"y", out}});
}

}  // namespace

BackwardFn softmax_backward(const Tensor& y, int64_t dim, bool log) {
  return [y, dim, log](const Tensor& dout, Grads& g) {
    g.pass(0, softmax_grad(dout, g.output(y), dim, log));
  };
}

Tensor softmax(const Tensor& x, int64_t dim) {
  const char* op = op_name("softmax");
  return run_op(op, &FastOps::softmax, recorded_softmax, op, x, dim, false);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  const char* op = op_name("log_softmax");
  return run_op(op, &FastOps::softmax, recorded_softmax, op, x, dim, true);
}

// softmax's backward serves: a blocked position has y = 0, so it gets no gradient.
Tensor masked_softmax(const Tensor& input, const Tensor& mask) {
  TG_CHECK(input.dim() >= 1, "masked_softmax: input must have rank >= 1, got shape {}",
           input.shape());
  TG_CHECK(mask.dtype() == DType::Bool, "masked_softmax: mask must be bool, got {}", mask.dtype());
  TG_CHECK(broadcast_shapes("masked_softmax", input.shape(), mask.shape()) == input.shape(),
           "masked_softmax: mask of shape {} does not broadcast to the input's shape {}",
           mask.shape(), input.shape());
  return run_op(op_name("masked_softmax"), &FastOps::masked_softmax, recorded_masked_softmax, input,
                mask);
}

}  // namespace tapegrad
