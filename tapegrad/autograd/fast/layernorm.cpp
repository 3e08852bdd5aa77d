// The fast room's layer norm (ops/layernorm.cpp): layer_norm, add_layer_norm and
// add_and_layer_norm as fused kernels (after llm.c's layernorm_forward/backward), each tested
// equal to its reference there. The forward saves
// the per-row mean and rstd = 1 / sqrt(var + eps); backward needs nothing else. Backward takes
// the rows in blocks, split between threads: a block's input gradients, then its partial sums
// of the weight's and bias's gradients, which are added in block order at the end.
//
// Glossary: N rows (all leading dims flattened), C features per row.
#include <cmath>

#include "tapegrad/autograd/fast/fast_room.h"
#include "tapegrad/autograd/fast/vmath.h"
#include "tapegrad/autograd/ops/dropout.h"
#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/autograd/threads.h"
#include "tapegrad/profile/profile.h"

namespace tapegrad {

namespace {

// Rows are normalised a block at a time, a block small enough to stay in cache between passes.
constexpr int64_t kNormBlock = 4096;  // elements

// The rows in a block of layer norm's forward: at least one, about kNormBlock elements.
int64_t norm_block(int64_t C) { return std::max<int64_t>(1, kNormBlock / std::max<int64_t>(C, 1)); }

// inp (N,C), weight (C) or null, bias (C) or null -> out (N,C), mean (N), rstd (N). A block's
// means and variances first, then its rstds in one loop, then its rows normalised: a row's
// square root and division are a chain of latency its normalisation waits on, which a row at
// a time would be most of a short row's time.
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                       int64_t N, int64_t C, double eps) {
  const int64_t block = norm_block(C);
  for (int64_t b0 = 0; b0 < N; b0 += block) {
    const int64_t b1 = std::min(N, b0 + block);
    for (int64_t n = b0; n < b1; ++n) {
      const T* x = inp + n * C;
      const T m = lane_sum(x, C) / static_cast<T>(C);
      mean[n] = m;
      rstd[n] = lane_sum_of<T>(C, [&](int64_t c) { return (x[c] - m) * (x[c] - m); });
    }
    for (int64_t n = b0; n < b1; ++n) {  // the variance becomes rstd
      const double var = static_cast<double>(rstd[n]) / static_cast<double>(C);
      rstd[n] = static_cast<T>(1 / std::sqrt(var + eps));
    }
    for (int64_t n = b0; n < b1; ++n) {
      const T* x = inp + n * C;
      const T m = mean[n], s = rstd[n];
      T* y = out + n * C;
      for (int64_t c = 0; c < C; ++c) {
        T norm = (x[c] - m) * s;
        if (weight) norm *= weight[c];
        if (bias) norm += bias[c];
        y[c] = norm;
      }
    }
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
    // one body for each dxhat, with weight or without: a choice inside the sums' lanes keeps
    // them from vectorising
    const auto row = [&](auto dxhat) {
      const T dnorm_mean = lane_sum_of<T>(C, dxhat) / static_cast<T>(C);
      const T dnorm_norm_mean =
          lane_sum_of<T>(C, [&](int64_t c) { return dxhat(c) * (x[c] - m) * s; }) /
          static_cast<T>(C);
      for (int64_t c = 0; c < C; ++c) {
        const T xhat = (x[c] - m) * s;
        store(dinp[n * C + c], s * (dxhat(c) - dnorm_mean - xhat * dnorm_norm_mean));
      }
    };
    if (weight) {
      row([&](int64_t c) { return dy[c] * weight[c]; });
    } else {
      row([&](int64_t c) { return dy[c]; });
    }
  }
}

//   dbias   = sum_n dy
//   dweight = sum_n dy * xhat
// over a block's rows, in order, into its partial sums pw (C) or null, pb (C) or null.
// dout, inp (rows,C), mean, rstd (rows) -> pw, pb
template <class T>
void layernorm_block_params(T* pw, T* pb, const T* dout, const T* inp, const T* mean, const T* rstd,
                            int64_t rows, int64_t C) {
  if (pw) std::fill_n(pw, C, T{0});
  if (pb) std::fill_n(pb, C, T{0});
  for (int64_t n = 0; n < rows; ++n) {
    const T* dy = dout + n * C;
    const T* x = inp + n * C;
    const T m = mean[n], s = rstd[n];
    for (int64_t c = 0; c < C; ++c) {
      if (pb) pb[c] += dy[c];
      if (pw) pw[c] += dy[c] * (x[c] - m) * s;
    }
  }
}

// Layer norm's backward over blocks of kSumBlockRows rows, split between threads: for each block,
// input(r0, r1) makes the input gradients of rows [r0, r1) (and whatever else the op's rows
// need), then the block's partial sums of dweight and dbias; dweight and dbias (null: not
// wanted) then add the blocks' sums in block order, a thread's share of the columns each.
// dout, inp (N,C), mean, rstd (N) -> dweight, dbias (C) or null
template <class T, class Input>
void layernorm_backward_blocks(Input input, T* dweight, T* dbias, const T* dout, const T* inp,
                               const T* mean, const T* rstd, int64_t N, int64_t C) {
  const int64_t blocks = (N + kSumBlockRows - 1) / kSumBlockRows;
  const bool params = dweight || dbias;
  const Tensor parts = params ? empty({2, blocks, C}, kDTypeOf<T>) : Tensor();
  T* pw = dweight ? parts.data<T>() : nullptr;
  T* pb = dbias ? parts.data<T>() + blocks * C : nullptr;
  parallel_for(blocks, grain_of_items(kSumBlockRows * C), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * kSumBlockRows, r1 = std::min(N, r0 + kSumBlockRows);
      input(r0, r1);
      if (!params) continue;
      layernorm_block_params<T>(pw ? pw + b * C : nullptr, pb ? pb + b * C : nullptr, dout + r0 * C,
                                inp + r0 * C, mean + r0, rstd + r0, r1 - r0, C);
    }
  });
  if (!params) return;
  parallel_for(C, grain_of_items(blocks), [&](int64_t c0, int64_t c1) {
    if (dbias) column_sums(dbias, pb, blocks, C, c0, c1);
    if (dweight) column_sums(dweight, pw, blocks, C, c0, c1);
  });
}

// The mask over a tensor of this shape as a bool tensor, element i kept when mask.keeps(i): for
// a reference that reads d through the dropout.
Tensor keep_mask(const Shape& shape, const DropoutMask& mask) {
  Tensor keep = empty(shape, DType::Bool);
  uint8_t* pk = mask_bytes(keep);
  for (int64_t i = 0, n = keep.numel(); i < n; ++i) pk[i] = mask.keeps(static_cast<uint64_t>(i));
  return keep;
}

// s = x + (kept ? d * scale : 0), every element kept when mask is null: a row of the sum
// add_layer_norm normalises, elements [start, start + n) of the mask. Arguments restrict and
// the mask a local, so the loops vectorise (the mask's hash included), as dropout's own.
template <class T>
void add_row(T* __restrict s, const T* __restrict x, const T* __restrict d, const DropoutMask* mask,
             uint64_t start, int64_t n, T scale) {
  if (mask == nullptr) {
    for (int64_t i = 0; i < n; ++i) s[i] = x[i] + d[i];
    return;
  }
  const DropoutRun run(*mask, start);
  for (int64_t i = 0; i < n; ++i) {
    s[i] = x[i] + (run.kept(static_cast<uint32_t>(i)) ? d[i] * scale : T{0});
  }
}

// dst = or += (kept ? g * scale : 0), every element kept when mask is null: a gradient row of
// add_layer_norm's x (no mask, scale 1) or d. The loops are in this function itself, the
// arguments restrict: through assign_or_add's lambda they lost restrict and, where the call was
// not inlined, ran scalar (the dropout hash included).
template <bool kAssign, class T>
void put_row_as(T* __restrict dst, const T* __restrict g, const DropoutMask* mask, uint64_t start,
                int64_t n, T scale) {
  if (mask == nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (kAssign) {
        dst[i] = g[i] * scale;
      } else {
        dst[i] += g[i] * scale;
      }
    }
    return;
  }
  const DropoutRun run(*mask, start);
  for (int64_t i = 0; i < n; ++i) {
    const T v = run.kept(static_cast<uint32_t>(i)) ? g[i] * scale : T{0};
    if constexpr (kAssign) {
      dst[i] = v;
    } else {
      dst[i] += v;
    }
  }
}

template <class T>
void put_row(T* dst, const T* g, bool first, const DropoutMask* mask, uint64_t start, int64_t n,
             T scale) {
  if (first) {
    put_row_as<true>(dst, g, mask, start, n, scale);
  } else {
    put_row_as<false>(dst, g, mask, start, n, scale);
  }
}

}  // namespace

Tensor fast_layer_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t C = input.size(-1);
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
    BackwardFn fast = [x = x.detach(), w = with_w ? w.detach() : Tensor(), mean, rstd, with_w,
                       with_b, N, C](const Tensor& dout, Grads& g) {
      dispatch_floating("layer_norm", dout.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const size_t iw = 1, ib = with_w ? 2 : 1;
        T* dw = with_w && g.wants(iw) ? g.write(iw, Writes::Some).grad.data<T>() : nullptr;
        T* db = with_b && g.wants(ib) ? g.write(ib, Writes::Some).grad.data<T>() : nullptr;
        const T *dy = dout.data<T>(), *px = x.data<T>(), *pm = mean.data<T>(), *ps = rstd.data<T>();
        const T* pw = with_w ? w.data<T>() : nullptr;
        // the blocks with the input's gradient assigned or added, or with none wanted
        const auto blocks = [&](T* dx, auto store) {
          layernorm_backward_blocks<T>(
              [&](int64_t r0, int64_t r1) {
                if (dx) {
                  layernorm_backward_input<T>(store, dx + r0 * C, dy + r0 * C, px + r0 * C, pw,
                                              pm + r0, ps + r0, r1 - r0, C);
                }
              },
              dw, db, dy, px, pm, ps, N, C);
        };
        if (!g.wants(0)) {
          blocks(nullptr, [](T&, T) {});
          return;
        }
        const auto [grad, first] = g.write(0, Writes::Every);
        assign_or_add(first, [&, dx = grad.data<T>()](auto store) { blocks(dx, store); });
      });
    };
    ReferenceFn reference = [x = x.detach(), w = with_w ? w.detach() : Tensor(),
                             b = with_b ? b.detach() : Tensor(), with_w, with_b, eps](Grads& g) {
      const size_t iw = 1, ib = with_w ? 2 : 1;
      return std::vector{layer_norm_reference(g.input(0, x), with_w ? g.input(iw, w) : w,
                                              with_b ? g.input(ib, b) : b, eps)};
    };
    record(op_name("layer_norm"), inputs, out,
           {.fast = std::move(fast), .reference = std::move(reference)});
    if (tape_details()) {
      std::vector<SavedBuffer> saved{{"x", x.shape(), x.dtype()},
                                     {"mean", mean.shape(), mean.dtype()},
                                     {"rstd", rstd.shape(), rstd.dtype()}};
      if (with_w) saved.push_back({"w", w.shape(), w.dtype()});
      note_saved(out, std::move(saved));
    }
  }
  return out;
}

// add_layer_norm and add_and_layer_norm under the name `op`: s = x + dropout(d) row by row, each
// row normalised by the forward kernel while it is in cache; s is kept, as layer norm's input,
// which backward reads, and with `keep_sum` it is the op's second output as well.
SumNorm fast_add_norm(const char* op, const Tensor& x_in, const Tensor& d_in, const Tensor& weight,
                      const Tensor& bias, double eps, double dropout, uint64_t key, bool keep_sum) {
  const bool drop = dropout > 0;
  const Tensor x = x_in.contiguous(), d = d_in.contiguous();
  const Tensor w = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  const int64_t C = x.size(-1), N = C == 0 ? 0 : x.numel() / C;
  const DropoutMask mask(dropout, key);
  const double scale = drop ? dropout_scale(dropout) : 1.0;
  const bool with_w = w.defined(), with_b = b.defined();
  std::vector<Tensor> inputs{x, d};
  if (with_w) inputs.push_back(w);
  if (with_b) inputs.push_back(b);
  const bool record_it = recording(inputs);
  // The sum is written out when it is an output or backward reads it; else (add_layer_norm in
  // evaluation) each block of it is a thread's scratch, in cache, and never reaches memory.
  const bool sum_out = keep_sum || record_it;
  SumNorm r{sum_out ? empty(x.shape(), x.dtype()) : Tensor(), empty(x.shape(), x.dtype())};
  Tensor mean = empty({N}, x.dtype()), rstd = empty({N}, x.dtype());
  dispatch_floating(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T *po = r.norm.data<T>(), *pm = mean.data<T>(), *pr = rstd.data<T>();
    T* ps = sum_out ? r.sum.data<T>() : nullptr;
    const T *px = x.data<T>(), *pd = d.data<T>();
    const T* pw = w.defined() ? w.data<T>() : nullptr;
    const T* pb = b.defined() ? b.data<T>() : nullptr;
    const auto sc = static_cast<T>(scale);
    const int64_t block = norm_block(C);
    parallel_for(N, grain_of_items(C), [&](int64_t n0, int64_t n1) {
      std::vector<T> scratch(sum_out ? 0 : block * C);
      for (int64_t b0 = n0; b0 < n1; b0 += block) {  // summed, normalised in cache
        const int64_t b1 = std::min(n1, b0 + block);
        T* s = ps ? ps + b0 * C : scratch.data();  // the block's rows of the sum
        for (int64_t n = b0; n < b1; ++n) {
          add_row<T>(s + (n - b0) * C, px + n * C, pd + n * C, drop ? &mask : nullptr,
                     static_cast<uint64_t>(n * C), C, sc);
        }
        layernorm_forward<T>(po + b0 * C, pm + b0, pr + b0, s, pw, pb, b1 - b0, C, eps);
      }
    });
  });
  if (!record_it) return r;
  // the entry keeps the sum's buffer, not its handle: an output's handle would own the entry
  const Tensor saved_sum = r.sum.detach();
  // The sum's gradient in a walk: the norm's through layer norm (dn) plus, with keep_sum, the
  // sum's own (dsum); either may be missing when only one output was used.
  BackwardFn fast = [s = saved_sum, w = with_w ? w.detach() : Tensor(), mean, rstd, mask, scale,
                     drop, with_w, with_b, keep_sum, N, C, op](const Tensor& dn_in, Grads& g) {
    const Tensor dsum_in = keep_sum ? g.dout(1) : Tensor();
    dispatch_floating(op, s.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const size_t iw = 2, ib = with_w ? 3 : 2;
      const T* dy = dn_in.defined() ? dn_in.data<T>() : nullptr;
      const T* dsum = dsum_in.defined() ? dsum_in.data<T>() : nullptr;
      T* dw = dy && with_w && g.wants(iw) ? g.write(iw, Writes::Some).grad.data<T>() : nullptr;
      T* db = dy && with_b && g.wants(ib) ? g.write(ib, Writes::Some).grad.data<T>() : nullptr;
      const T *ps = s.data<T>(), *pm = mean.data<T>(), *pr = rstd.data<T>();
      const T* pw = with_w ? w.data<T>() : nullptr;
      // With both gradients in, x takes the sum's gradient as its own (as add hands its own on;
      // added to what x holds already, if anything), and layer norm's part is added into it row
      // by row below, after d's row has read the sum's row.
      const bool both = dy && dsum;
      if (both && g.wants(0)) g.pass(0, dsum_in);
      // the buffers in the order x, d: when x and d are one tensor, x's writer is first
      T* dx = nullptr;
      T* dd = nullptr;
      bool first_x = false, first_d = false;
      if (g.wants(0)) {
        const auto [grad, first] = g.write(0, Writes::Every);
        dx = grad.data<T>();
        first_x = first;
      }
      if (g.wants(1)) {
        const auto [grad, first] = g.write(1, Writes::Every);
        dd = grad.data<T>();
        first_d = first;
      }
      const auto sc = static_cast<T>(scale);
      // rows [r0, r1) of dx and dd
      const auto input = [&](int64_t r0, int64_t r1) {
        if (!dx && !dd) return;
        std::vector<T> ds(dy ? C : 0);      // the sum's gradient, a row at a time
        std::vector<T> part(both ? C : 0);  // layer norm's part of it, when both came
        const auto assign = [](T& dst, T v) { dst = v; };
        for (int64_t n = r0; n < r1; ++n) {
          const auto at = static_cast<uint64_t>(n * C);
          const T* row = dsum ? dsum + n * C : nullptr;
          if (both) {
            layernorm_backward_input<T>(assign, part.data(), dy + n * C, ps + n * C, pw, pm + n,
                                        pr + n, 1, C);
            for (int64_t c = 0; c < C; ++c) ds[c] = part[c] + row[c];
            // d's row first: the sum's row may be x's, which the next line changes
            if (dd) put_row<T>(dd + n * C, ds.data(), first_d, drop ? &mask : nullptr, at, C, sc);
            if (dx) put_row<T>(dx + n * C, part.data(), false, nullptr, at, C, T{1});
            continue;
          }
          if (dy) {
            layernorm_backward_input<T>(assign, ds.data(), dy + n * C, ps + n * C, pw, pm + n,
                                        pr + n, 1, C);
            row = ds.data();
          }
          // x's row first: when x and d are one tensor, d's then adds to it
          if (dx) put_row<T>(dx + n * C, row, first_x, nullptr, at, C, T{1});
          if (dd) put_row<T>(dd + n * C, row, first_d, drop ? &mask : nullptr, at, C, sc);
        }
      };
      layernorm_backward_blocks<T>(input, dw, db, dy, ps, pm, pr, N, C);
    });
  };
  // d is not kept (one more [.., C] a layer until backward): the reference reads it through
  // the dropout only, so d on the kept elements, (s - x) / scale, stands in for it.
  ReferenceFn reference = [x = x.detach(), s = saved_sum, w = with_w ? w.detach() : Tensor(),
                           b = with_b ? b.detach() : Tensor(), with_w, with_b, eps, mask, drop,
                           dropout, scale, keep_sum](Grads& g) {
    const Tensor rest = s - x;
    const Tensor d = !drop       ? rest
                     : scale > 0 ? where(keep_mask(s.shape(), mask), rest / scale, zeros_like(rest))
                                 : zeros_like(rest);
    const size_t iw = 2, ib = with_w ? 3 : 2;
    const SumNorm r = add_and_layer_norm_reference(
        g.input(0, x), g.input(1, d), with_w ? g.input(iw, w) : w, with_b ? g.input(ib, b) : b, eps,
        drop ? dropout : 0.0, mask.key);
    return keep_sum ? std::vector{r.norm, r.sum} : std::vector{r.norm};
  };
  std::vector<Tensor*> outs{&r.norm};
  if (keep_sum) outs.push_back(&r.sum);
  record(op, inputs, outs, {.fast = std::move(fast), .reference = std::move(reference)});
  if (tape_details()) {
    std::vector<SavedBuffer> saved{{"sum", r.sum.shape(), r.sum.dtype()},
                                   {"mean", mean.shape(), mean.dtype()},
                                   {"rstd", rstd.shape(), rstd.dtype()}};
    if (with_w) saved.push_back({"w", w.shape(), w.dtype()});
    note_saved(r.norm, std::move(saved));
  }
  return r;
}

}  // namespace tapegrad
