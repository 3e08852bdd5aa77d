#include "autograd/ops/dropout.h"

#include "autograd/tape.h"

namespace tapegrad {

namespace {

// inp (N) -> out (N), keep (N): keep[i] = u_i >= p, out = keep ? x / (1 - p) : 0
template <class T>
void dropout_forward(T* out, bool* keep, const T* inp, int64_t N, double p, Generator& gen) {
  const T scale = p < 1 ? static_cast<T>(1.0 / (1.0 - p)) : T{0};
  for (int64_t i = 0; i < N; ++i) {
    keep[i] = gen.uniform() >= p;
    out[i] = keep[i] ? inp[i] * scale : T{0};
  }
}

// dx += keep ? dout / (1 - p) : 0
template <class T>
void dropout_backward(T* dinp, const T* dout, const bool* keep, int64_t N, double p) {
  const T scale = p < 1 ? static_cast<T>(1.0 / (1.0 - p)) : T{0};
  for (int64_t i = 0; i < N; ++i) {
    if (keep[i]) dinp[i] += dout[i] * scale;
  }
}

}  // namespace

Tensor dropout(const Tensor& input, double p, bool training, Generator& gen) {
  TG_CHECK(p >= 0 && p <= 1, "dropout: probability must be in [0, 1], got {}", p);
  if (!training || p == 0) return input;
  const Tensor x = input.contiguous();
  const int64_t N = x.numel();
  Tensor out = empty(x.shape(), x.dtype());
  Tensor keep = empty(x.shape(), DType::Bool);
  dispatch_floating("dropout", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    dropout_forward<T>(out.data<T>(), keep.data<bool>(), x.data<T>(), N, p, gen);
  });
  if (recording(x)) {
    record("dropout", {x}, out, [keep, N, p](const Tensor& dout, Grads& g) {
      dispatch_floating("dropout", dout.dtype(), [&](auto tag) {
        using T = decltype(tag);
        dropout_backward<T>(g[0].data<T>(), dout.data<T>(), keep.data<bool>(), N, p);
      });
    });
  }
  return out;
}

}  // namespace tapegrad
