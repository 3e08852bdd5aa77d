#include "autograd/ops/dropout.h"

#include <algorithm>
#include <cmath>

#include "autograd/tape.h"

namespace tapegrad {

namespace {

// The keep mask's bools as bytes (0 or 1): GCC vectorises byte loads, not bool ones.
uint8_t* mask_bytes(const Tensor& keep) { return reinterpret_cast<uint8_t*>(keep.data<bool>()); }

// inp (N) -> out (N), keep (N): keep[i] = u_i >= p, out = keep ? x / (1 - p) : 0.
// u_i is a 32-bit uniform word compared with p * 2^32, so a draw costs half a generator step;
// the words come in blocks that stay in L1, and the masking loop has no branch, so it
// vectorises. At p = 1 the scale is 0 and every output is 0 whatever the words.
template <class T>
void dropout_forward(T* __restrict out, uint8_t* __restrict keep, const T* __restrict inp, int64_t N,
                     double p, Generator& gen) {
  const T scale = p < 1 ? static_cast<T>(1.0 / (1.0 - p)) : T{0};
  const auto threshold = static_cast<uint32_t>(std::min(std::ldexp(p, 32), 4294967295.0));
  constexpr int64_t kBlock = 1024;
  uint32_t words[kBlock];
  for (int64_t start = 0; start < N; start += kBlock) {
    const int64_t n = std::min(kBlock, N - start);
    gen.fill_u32(words, n);
    for (int64_t i = 0; i < n; ++i) {
      const bool k = words[i] >= threshold;
      const T kept = inp[start + i] * scale;
      keep[start + i] = k;
      out[start + i] = k ? kept : T{0};
    }
  }
}

// dx += keep ? dout / (1 - p) : 0
template <class T>
void dropout_backward(T* __restrict dinp, const T* __restrict dout, const uint8_t* __restrict keep,
                      int64_t N, double p) {
  const T scale = p < 1 ? static_cast<T>(1.0 / (1.0 - p)) : T{0};
  for (int64_t i = 0; i < N; ++i) {
    const T kept = dout[i] * scale;
    dinp[i] += keep[i] ? kept : T{0};
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
    dropout_forward<T>(out.data<T>(), mask_bytes(keep), x.data<T>(), N, p, gen);
  });
  if (recording(x)) {
    record("dropout", {x}, out, [keep, N, p](const Tensor& dout, Grads& g) {
      dispatch_floating("dropout", dout.dtype(), [&](auto tag) {
        using T = decltype(tag);
        dropout_backward<T>(g[0].data<T>(), dout.data<T>(), mask_bytes(keep), N, p);
      });
    });
  }
  return out;
}

}  // namespace tapegrad
