// Inverted dropout: the keep mask drawn from a counter-based hash of one generator draw, and the
// kernel that applies it. With its key fixed, dropout is linear in x: its derivative is the
// same dropout applied to the gradient, which draws the same mask again.
#include "tapegrad/autograd/ops/dropout.h"

#include <algorithm>
#include <cmath>

#include "tapegrad/autograd/ops/registry.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/autograd/threads.h"

namespace tapegrad {

namespace {

// Threads make the mask in blocks of kBlock elements.
constexpr int64_t kBlock = 2048;

// Elements [start, start + n): out = mask.keeps(start + i) ? x * dropout_scale(p) : 0.
template <class T>
void dropout_forward(T* __restrict out, const T* __restrict inp, int64_t start, int64_t n, double p,
                     const DropoutMask& mask) {
  const auto scale = static_cast<T>(dropout_scale(p));
  for (int64_t i = 0; i < n; ++i) out[i] = mask.keeps(start + i) ? inp[i] * scale : T{0};
}

}  // namespace

DropoutMask::DropoutMask(double p, uint64_t key)
    : key(key),
      threshold(static_cast<uint32_t>(std::min(std::ldexp(p, 32), 4294967295.0))),
      offset(static_cast<uint32_t>(counter_bits(key, 0) >> 32)),
      salt0(static_cast<uint32_t>(counter_bits(key, 0))) {}

DropoutDraw draw_dropout(const char* op, const DropoutOptions& dropout, const char* field) {
  const double p = dropout.p;
  TG_CHECK(p >= 0 && p <= 1, "{}: dropout must be in [0, 1], got {} ({}.p)", op, p, field);
  const bool drop = dropout.training && p > 0;
  TG_CHECK(!drop || dropout.gen != nullptr, "{}: dropout {} in training needs a generator ({}.gen)",
           op, p, field);
  return {dropout.training ? p : 0, drop ? dropout.gen->next_u64() : 0};
}

Tensor dropout(const Tensor& input, double p, bool training, Generator& gen) {
  TG_CHECK(p >= 0 && p <= 1, "dropout: probability must be in [0, 1], got {}", p);
  if (!training || p == 0) return input;
  return dropout(input, p, gen.next_u64());
}

Tensor dropout(const Tensor& input, double p, uint64_t key) {
  return run_op(op_name("dropout"), [&] {
    TG_CHECK(p >= 0 && p <= 1, "dropout: probability must be in [0, 1], got {}", p);
    if (p == 0) return input;
    const Tensor x = input.contiguous();
    const int64_t N = x.numel();
    Tensor out = empty(x.shape(), x.dtype());
    const DropoutMask mask(p, key);
    dispatch_floating("dropout", x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* po = out.data<T>();
      const T* px = x.data<T>();
      parallel_for((N + kBlock - 1) / kBlock, grain_of_items(kBlock), [&](int64_t b, int64_t e) {
        for (int64_t block = b; block < e; ++block) {
          const int64_t start = block * kBlock;
          dropout_forward<T>(po + start, px + start, start, std::min(kBlock, N - start), p, mask);
        }
      });
    });
    if (!recording(x)) return out;
    // dx = keep ? dout * scale : 0, the mask drawn again from the key
    return record(
        op_name("dropout"), {x}, out,
        {.backward = [p, key](const Tensor& dout, Grads& g) { g.pass(0, dropout(dout, p, key)); }});
  });
}

}  // namespace tapegrad
