// Inverted dropout: the keep mask drawn from a counter-based hash of one generator draw, the
// forward and backward kernels that apply it.
#include "tapegrad/autograd/ops/dropout.h"

#include <algorithm>
#include <cmath>

#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/autograd/threads.h"
#include "tapegrad/profile/profile.h"

namespace tapegrad {

namespace {

// Threads make the mask in blocks of kBlock elements.
constexpr int64_t kBlock = 2048;

// Elements [start, start + n): inp -> out, keep: keep[i] = mask.keeps(start + i),
// out = keep ? x * dropout_scale(p) : 0.
template <class T>
void dropout_forward(T* __restrict out, uint8_t* __restrict keep, const T* __restrict inp,
                     int64_t start, int64_t n, double p, const DropoutMask& mask) {
  const auto scale = static_cast<T>(dropout_scale(p));
  const DropoutMask m = mask;  // a local: the byte stores below could alias the caller's
  for (int64_t i = 0; i < n; ++i) {
    const bool k = m.keeps(start + i);
    keep[i] = k;
    out[i] = k ? inp[i] * scale : T{0};
  }
}

}  // namespace

DropoutMask::DropoutMask(double p, uint64_t key)
    : key(key), threshold(static_cast<uint32_t>(std::min(std::ldexp(p, 32), 4294967295.0))) {}

Tensor keep_mask(const Shape& shape, const DropoutMask& mask) {
  Tensor keep = empty(shape, DType::Bool);
  uint8_t* pk = mask_bytes(keep);
  for (int64_t i = 0, n = keep.numel(); i < n; ++i) pk[i] = mask.keeps(static_cast<uint64_t>(i));
  return keep;
}

Tensor dropout(const Tensor& input, double p, bool training, Generator& gen) {
  TG_CHECK(p >= 0 && p <= 1, "dropout: probability must be in [0, 1], got {}", p);
  if (!training || p == 0) return input;
  return dropout(input, p, gen.next_u64());
}

Tensor dropout(const Tensor& input, double p, uint64_t key) {
  const profile::Scope profile_scope("dropout");
  TG_CHECK(p >= 0 && p <= 1, "dropout: probability must be in [0, 1], got {}", p);
  if (p == 0) return input;
  const Tensor x = input.contiguous();
  const int64_t N = x.numel();
  Tensor out = empty(x.shape(), x.dtype());
  Tensor keep = empty(x.shape(), DType::Bool);
  const DropoutMask mask(p, key);
  dispatch_floating("dropout", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* po = out.data<T>();
    uint8_t* pk = mask_bytes(keep);
    const T* px = x.data<T>();
    parallel_for((N + kBlock - 1) / kBlock, grain_of_items(kBlock), [&](int64_t b, int64_t e) {
      for (int64_t block = b; block < e; ++block) {
        const int64_t start = block * kBlock;
        dropout_forward<T>(po + start, pk + start, px + start, start, std::min(kBlock, N - start),
                           p, mask);
      }
    });
  });
  if (recording(x)) {
    record("dropout", {x}, out,
           {.backward =
                [keep, p](const Tensor& dout, Grads& g) {
                  // the same mask on the gradient: dx = keep ? dout * scale : 0
                  g.pass(0, where(keep, mul(dout, dropout_scale(p)), zeros_like(dout)));
                }},
           {{"keep", keep}});
  }
  return out;
}

}  // namespace tapegrad
