// Elementwise kernels. Each op is its forward formula and its local derivative, side by side;
// two generic drivers (unary, binary) run them over any layout through for_each_offset and
// record the backward pass, which is always dx += dout * (local derivative).
#include "tapegrad/autograd/ops/elementwise.h"

#include <cmath>
#include <numbers>

#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/profile.h"
#include "tapegrad/autograd/strided.h"
#include "tapegrad/autograd/tape.h"

namespace tapegrad {

namespace {

// What a unary op's derivative is written in terms of: its input x, its output y, or neither.
enum class Saves { Input, Output, Nothing };

// y = f(x); backward: dx += dout * df(s), with s the saved x or y (or 0 for Saves::Nothing).
// grad(dout, s) is the same gradient written in differentiable ops (the formula).
template <class F, class DF, class Grad>
Tensor unary(const char* op, const Tensor& input, Saves saves, F f, DF df, Grad grad) {
  const profile::Scope profile_scope(op);
  const Tensor x = input.contiguous();
  Tensor out = empty(x.shape(), x.dtype());
  const int64_t n = x.numel();
  dispatch_floating(op, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = out.data<T>();
    parallel_for(n, kGrainElements, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) py[i] = static_cast<T>(f(px[i]));
    });
  });
  if (recording(x)) {
    Tensor saved = saves == Saves::Input    ? x.detach()
                   : saves == Saves::Output ? out.detach()
                                            : Tensor();
    record(op, {x}, out,
           {.backward =
                [input = saves == Saves::Input ? x : Tensor(), saved, saves, grad](
                    const Tensor& dout, Grads& g) {
                  g.pass(0, grad(dout, saves == Saves::Output ? g.output(saved) : input));
                },
            .fast =
                [saved, df, n, op](const Tensor& dout, Grads& g) {
                  dispatch_floating(op, dout.dtype(), [&](auto tag) {
                    using T = decltype(tag);
                    const auto [grad, first] = g.write(0, Writes::Every);
                    T* dx = grad.data<T>();
                    const T* d = dout.data<T>();
                    const T* s = saved.defined() ? saved.data<T>() : nullptr;
                    assign_or_add(first, [&](auto store) {
                      parallel_for(n, kGrainElements, [&](int64_t b, int64_t e) {
                        if (s) {
                          for (int64_t i = b; i < e; ++i)
                            store(dx[i], d[i] * static_cast<T>(df(s[i])));
                        } else {
                          for (int64_t i = b; i < e; ++i)
                            store(dx[i], d[i] * static_cast<T>(df(T{0})));
                        }
                      });
                    });
                  });
                }});
    if (tape_details() && saved.defined()) {
      note_saved(out, {{saves == Saves::Input ? "x" : "y", saved}});
    }
  }
  return out;
}

// out = f(a, b) with broadcasting; backward: da += dout * fa(a, b), db += dout * fb(a, b),
// each summed over the dims its operand was broadcast along (a stride of 0 makes the += do
// that). Ops whose partials are constants (add, sub) pass kSavesInputs = false and keep no
// input alive. ga(dout, a, b) and gb(...) are the formulas: dout * (partial) in differentiable
// ops, before the sum back to the operand's shape.
template <bool kSavesInputs, class F, class FA, class FB, class GA, class GB>
Tensor binary(const char* op, const Tensor& a, const Tensor& b, F f, FA fa, FB fb, GA ga, GB gb) {
  const profile::Scope profile_scope(op);
  TG_CHECK(a.dtype() == b.dtype(), "{}: dtypes differ: {} and {}", op, a.dtype(), b.dtype());
  const Shape shape = broadcast_shapes(op, a.shape(), b.shape());
  Tensor out = empty(shape, a.dtype());
  dispatch_floating(op, a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Shape sa = broadcast_strides(a.shape(), a.strides(), shape);
    const Shape sb = broadcast_strides(b.shape(), b.strides(), shape);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    parallel_for_each_offset<3>(shape, {&out.strides(), &sa, &sb}, kGrainElements,
                                [&](const auto& o) { po[o[0]] = f(pa[o[1]], pb[o[2]]); });
  });
  if (recording(a, b)) {
    const Tensor sa = kSavesInputs ? a.detach() : Tensor();
    const Tensor sb = kSavesInputs ? b.detach() : Tensor();
    const Shape a_shape = a.shape(), b_shape = b.shape();
    record(
        op, {a, b}, out,
        {.backward =
             [a = kSavesInputs ? a : Tensor(), b = kSavesInputs ? b : Tensor(), a_shape, b_shape,
              ga, gb](const Tensor& dout, Grads& g) {
               if (g.wants(0)) g.pass(0, sum_to(ga(dout, a, b), a_shape));
               if (g.wants(1)) g.pass(1, sum_to(gb(dout, a, b), b_shape));
             },
         .fast =
             [=](const Tensor& dout, Grads& g) {
               dispatch_floating(op, dout.dtype(), [&](auto tag) {
                 using T = decltype(tag);
                 const T* d = dout.data<T>();
                 const Shape& so = dout.strides();
                 // Strides of the gradient buffers (contiguous, the operands' shapes) seen from
                 // `shape`.
                 const Shape sga = broadcast_strides(a_shape, contiguous_strides(a_shape), shape);
                 const Shape sgb = broadcast_strides(b_shape, contiguous_strides(b_shape), shape);
                 // Each operand's gradient is dout * partial, summed over the dims it was broadcast
                 // along, delivered by the one rule (Grads, tape.h):
                 //   pass:    a partial of 1 and no broadcast (either operand of add, a of sub):
                 //   the
                 //            gradient is dout itself, handed on without a copy, and to one operand
                 //            only, since a buffer has one owner
                 //   write:   otherwise, each element once (Writes::Every), or summed over the
                 //            broadcast dims (Writes::Some)
                 //   threads: the loop is split between threads unless two would add into one
                 //            element (the split dim is one the operand was broadcast along)
                 bool passed = false;
                 for (size_t i = 0; i < 2; ++i) {
                   if (!g.wants(i)) continue;
                   const bool broadcast = numel(i == 0 ? a_shape : b_shape) != numel(shape);
                   if constexpr (!kSavesInputs) {
                     if (!broadcast && !passed &&
                         (i == 0 ? fa(T{0}, T{0}) : fb(T{0}, T{0})) == T{1}) {
                       g.pass(i, dout);
                       passed = true;
                       continue;
                     }
                   }
                   const auto [grad, first] = g.write(i, broadcast ? Writes::Some : Writes::Every);
                   T* dx = grad.data<T>();
                   const Shape& sg = i == 0 ? sga : sgb;
                   const int64_t d0 = split_dim(shape);
                   const int64_t grain = d0 >= 0 && sg[d0] == 0 ? INT64_MAX : kGrainElements;
                   assign_or_add(first, [&](auto store) {
                     if constexpr (kSavesInputs) {
                       const Shape ssa = broadcast_strides(a_shape, sa.strides(), shape);
                       const Shape ssb = broadcast_strides(b_shape, sb.strides(), shape);
                       const T* pa = sa.data<T>();
                       const T* pb = sb.data<T>();
                       parallel_for_each_offset<4>(
                           shape, {&sg, &so, &ssa, &ssb}, grain, [&](const auto& o) {
                             const T partial =
                                 i == 0 ? fa(pa[o[2]], pb[o[3]]) : fb(pa[o[2]], pb[o[3]]);
                             store(dx[o[0]], d[o[1]] * partial);
                           });
                     } else {
                       const T partial = i == 0 ? fa(T{0}, T{0}) : fb(T{0}, T{0});
                       parallel_for_each_offset<2>(shape, {&sg, &so}, grain, [&](const auto& o) {
                         store(dx[o[0]], d[o[1]] * partial);
                       });
                     }
                   });
                 }
               });
             }});
    if (kSavesInputs && tape_details()) note_saved(out, {{"a", a}, {"b", b}});
  }
  return out;
}

// y = scale * x + shift: the shared kernel of the scalar forms and neg.
Tensor affine(const char* op, const Tensor& x, double scale, double shift) {
  const profile::Scope profile_scope(op);
  return unary(
      op, x, Saves::Nothing, [=](auto v) { return static_cast<decltype(v)>(scale * v + shift); },
      [=](auto) { return scale; },
      [=](const Tensor& dout, const Tensor&) { return mul(dout, scale); });
}

}  // namespace

// d(a+b)/da = 1, d(a+b)/db = 1
Tensor add(const Tensor& a, const Tensor& b) {
  return binary<false>(
      "add", a, b, [](auto x, auto y) { return x + y; }, [](auto, auto) { return 1; },
      [](auto, auto) { return 1; }, [](const Tensor& d, const Tensor&, const Tensor&) { return d; },
      [](const Tensor& d, const Tensor&, const Tensor&) { return d; });
}

// d(a-b)/da = 1, d(a-b)/db = -1
Tensor sub(const Tensor& a, const Tensor& b) {
  return binary<false>(
      "sub", a, b, [](auto x, auto y) { return x - y; }, [](auto, auto) { return 1; },
      [](auto, auto) { return -1; },
      [](const Tensor& d, const Tensor&, const Tensor&) { return d; },
      [](const Tensor& d, const Tensor&, const Tensor&) { return neg(d); });
}

// d(ab)/da = b, d(ab)/db = a
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary<true>(
      "mul", a, b, [](auto x, auto y) { return x * y; }, [](auto, auto y) { return y; },
      [](auto x, auto) { return x; },
      [](const Tensor& d, const Tensor&, const Tensor& y) { return mul(d, y); },
      [](const Tensor& d, const Tensor& x, const Tensor&) { return mul(d, x); });
}

// d(a/b)/da = 1/b, d(a/b)/db = -a/b^2
Tensor div(const Tensor& a, const Tensor& b) {
  return binary<true>(
      "div", a, b, [](auto x, auto y) { return x / y; }, [](auto, auto y) { return 1 / y; },
      [](auto x, auto y) { return -x / (y * y); },
      [](const Tensor& d, const Tensor&, const Tensor& y) { return div(d, y); },
      [](const Tensor& d, const Tensor& x, const Tensor& y) {
        return neg(div(mul(d, x), mul(y, y)));
      });
}

Tensor add(const Tensor& x, double s) { return affine("add", x, 1.0, s); }
Tensor sub(const Tensor& x, double s) { return affine("sub", x, 1.0, -s); }
Tensor mul(const Tensor& x, double s) { return affine("mul", x, s, 0.0); }
Tensor div(const Tensor& x, double s) { return affine("div", x, 1.0 / s, 0.0); }
Tensor neg(const Tensor& x) { return affine("neg", x, -1.0, 0.0); }

// d exp(x) = exp(x) = y
Tensor exp(const Tensor& x) {
  return unary(
      "exp", x, Saves::Output, [](auto v) { return std::exp(v); }, [](auto y) { return y; },
      [](const Tensor& d, const Tensor& y) { return mul(d, y); });
}

// d log(x) = 1/x
Tensor log(const Tensor& x) {
  return unary(
      "log", x, Saves::Input, [](auto v) { return std::log(v); }, [](auto v) { return 1 / v; },
      [](const Tensor& d, const Tensor& x) { return div(d, x); });
}

// d sqrt(x) = 1 / (2 sqrt(x)) = 0.5 / y
Tensor sqrt(const Tensor& x) {
  return unary(
      "sqrt", x, Saves::Output, [](auto v) { return std::sqrt(v); },
      [](auto y) { return decltype(y)(0.5) / y; },
      [](const Tensor& d, const Tensor& y) { return div(mul(d, 0.5), y); });
}

// d tanh(x) = 1 - tanh(x)^2 = 1 - y^2
Tensor tanh(const Tensor& x) {
  return unary(
      "tanh", x, Saves::Output, [](auto v) { return std::tanh(v); },
      [](auto y) { return 1 - y * y; },
      [](const Tensor& d, const Tensor& y) { return mul(d, 1.0 - mul(y, y)); });
}

// d relu(x) = 1 where y > 0, else 0 (0 at x = 0, as PyTorch)
Tensor relu(const Tensor& x) {
  return unary(
      "relu", x, Saves::Output, [](auto v) { return v > 0 ? v : decltype(v){0}; },
      [](auto y) { return y > 0 ? 1 : 0; },
      [](const Tensor& d, const Tensor& y) { return masked_fill(d, eq(y, 0), 0); });
}

// gelu(x) = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2
// d gelu(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
Tensor gelu(const Tensor& x) {
  return unary(
      "gelu", x, Saves::Input, [](auto v) { return detail::gelu_of(v); },
      [](auto v) { return detail::gelu_slope_of(v); },
      [](const Tensor& d, const Tensor& x) { return mul(d, gelu_slope(x)); });
}

Tensor gelu_slope(const Tensor& x) {
  const Tensor cdf = mul(add(erf(mul(x, 1 / std::numbers::sqrt2)), 1.0), 0.5);
  const Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), std::numbers::inv_sqrtpi / std::numbers::sqrt2);
  return add(cdf, mul(x, pdf));
}

// d erf(x) = 2 / sqrt(pi) exp(-x^2)
Tensor erf(const Tensor& x) {
  return unary(
      "erf", x, Saves::Input, [](auto v) { return std::erf(v); },
      [](auto v) { return 2 * std::numbers::inv_sqrtpi_v<decltype(v)> * std::exp(-v * v); },
      [](const Tensor& d, const Tensor& x) {
        return mul(d, mul(exp(neg(mul(x, x))), 2 * std::numbers::inv_sqrtpi));
      });
}

// d x^p = p x^(p-1)
Tensor pow(const Tensor& x, double p) {
  return unary(
      "pow", x, Saves::Input, [p](auto v) { return static_cast<decltype(v)>(std::pow(v, p)); },
      [p](auto v) { return static_cast<decltype(v)>(p * std::pow(v, p - 1)); },
      [p](const Tensor& d, const Tensor& x) { return mul(d, mul(pow(x, p - 1), p)); });
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  const profile::Scope profile_scope("masked_fill");
  TG_CHECK(mask.dtype() == DType::Bool, "masked_fill: mask must be bool, got {}", mask.dtype());
  TG_CHECK(broadcast_shapes("masked_fill", x.shape(), mask.shape()) == x.shape(),
           "masked_fill: mask of shape {} does not broadcast to the input's shape {}", mask.shape(),
           x.shape());
  const Shape sm = broadcast_strides(mask.shape(), mask.strides(), x.shape());
  Tensor out = empty(x.shape(), x.dtype());
  dispatch_floating("masked_fill", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    const bool* pm = mask.data<bool>();
    T* po = out.data<T>();
    const auto v = static_cast<T>(value);
    parallel_for_each_offset<3>(x.shape(), {&out.strides(), &x.strides(), &sm}, kGrainElements,
                                [&](const auto& o) { po[o[0]] = pm[o[2]] ? v : px[o[1]]; });
  });
  if (recording(x)) {
    // dx = dout where the mask is false, 0 where it is true
    record("masked_fill", {x}, out,
           {.backward = [mask](const Tensor& dout,
                               Grads& g) { g.pass(0, masked_fill(dout, mask, 0)); },
            .fast =
                [mask, sm](const Tensor& dout, Grads& g) {
                  dispatch_floating("masked_fill", dout.dtype(), [&](auto tag) {
                    using T = decltype(tag);
                    const auto [grad, first] = g.write(0, Writes::Every);
                    T* dx = grad.data<T>();
                    const T* d = dout.data<T>();
                    const bool* pm = mask.data<bool>();
                    assign_or_add(first, [&](auto store) {
                      parallel_for_each_offset<2>(
                          dout.shape(), {&dout.strides(), &sm}, kGrainElements,
                          [&](const auto& o) { store(dx[o[0]], pm[o[1]] ? T{0} : d[o[0]]); });
                    });
                  });
                },
            .allow_inf = std::isinf(value)});
    if (tape_details()) note_saved(out, {{"mask", mask}});
  }
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const profile::Scope profile_scope("where");
  TG_CHECK(cond.dtype() == DType::Bool, "where: condition must be bool, got {}", cond.dtype());
  TG_CHECK(a.dtype() == b.dtype(), "where: dtypes differ: {} and {}", a.dtype(), b.dtype());
  const Shape shape =
      broadcast_shapes("where", cond.shape(), broadcast_shapes("where", a.shape(), b.shape()));
  const Shape sc = broadcast_strides(cond.shape(), cond.strides(), shape);
  Tensor out = empty(shape, a.dtype());
  dispatch_floating("where", a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Shape sa = broadcast_strides(a.shape(), a.strides(), shape);
    const Shape sb = broadcast_strides(b.shape(), b.strides(), shape);
    const bool* pc = cond.data<bool>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    parallel_for_each_offset<4>(shape, {&out.strides(), &sc, &sa, &sb}, kGrainElements,
                                [&](const auto& o) { po[o[0]] = pc[o[1]] ? pa[o[2]] : pb[o[3]]; });
  });
  if (recording(a, b)) {
    // da = dout where cond, db = dout where not cond; each summed to its operand's shape
    record("where", {a, b}, out,
           {.backward =
                [cond, a_shape = a.shape(), b_shape = b.shape()](const Tensor& dout, Grads& g) {
                  const Tensor zero = zeros_like(dout);
                  if (g.wants(0)) g.pass(0, sum_to(where(cond, dout, zero), a_shape));
                  if (g.wants(1)) g.pass(1, sum_to(where(cond, zero, dout), b_shape));
                },
            .fast =
                [cond, sc, shape, a_shape = a.shape(), b_shape = b.shape()](const Tensor& dout,
                                                                            Grads& g) {
                  dispatch_floating("where", dout.dtype(), [&](auto tag) {
                    using T = decltype(tag);
                    const T* d = dout.data<T>();
                    const bool* pc = cond.data<bool>();
                    for (size_t i = 0; i < 2; ++i) {
                      if (!g.wants(i)) continue;
                      const Shape& s = i == 0 ? a_shape : b_shape;
                      const Shape sg = broadcast_strides(s, contiguous_strides(s), shape);
                      T* dx = g.write(i, Writes::Some).grad.data<T>();
                      const bool take = i == 0;
                      for_each_offset<3>(shape, {&sg, &dout.strides(), &sc}, [&](const auto& o) {
                        if (pc[o[2]] == take) dx[o[0]] += d[o[1]];
                      });
                    }
                  });
                }});
    if (tape_details()) note_saved(out, {{"cond", cond}});
  }
  return out;
}

namespace {
template <class Pred>
Tensor compare(const Tensor& x, Pred pred) {
  Tensor out = empty(x.shape(), DType::Bool);
  bool* po = out.data<bool>();
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    for_each_offset<2>(x.shape(), {&out.strides(), &x.strides()},
                       [&](const auto& o) { po[o[0]] = pred(static_cast<double>(px[o[1]])); });
  });
  return out;
}
}  // namespace

Tensor eq(const Tensor& x, double value) {
  return compare(x, [value](double v) { return v == value; });
}
Tensor ne(const Tensor& x, double value) {
  return compare(x, [value](double v) { return v != value; });
}

Tensor logical_or(const Tensor& a, const Tensor& b) {
  TG_CHECK(a.dtype() == DType::Bool && b.dtype() == DType::Bool,
           "logical_or: operands must be bool, got {} and {}", a.dtype(), b.dtype());
  const Shape shape = broadcast_shapes("logical_or", a.shape(), b.shape());
  const Shape sa = broadcast_strides(a.shape(), a.strides(), shape);
  const Shape sb = broadcast_strides(b.shape(), b.strides(), shape);
  Tensor out = empty(shape, DType::Bool);
  const bool* pa = a.data<bool>();
  const bool* pb = b.data<bool>();
  bool* po = out.data<bool>();
  for_each_offset<3>(shape, {&out.strides(), &sa, &sb},
                     [&](const auto& o) { po[o[0]] = pa[o[1]] || pb[o[2]]; });
  return out;
}

}  // namespace tapegrad
