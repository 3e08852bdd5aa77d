// Elementwise ops. Each op is its forward formula on one element and its derivative, side by
// side, the derivative a function of dout and the saved values in differentiable ops: the
// backward of first order and, under create_graph, of higher orders. Two generic drivers
// (unary, binary) run them over any layout.
#include "tapegrad/autograd/ops/elementwise.h"

#include <cmath>
#include <functional>
#include <numbers>

#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/ops/registry.h"
#include "tapegrad/autograd/strided.h"
#include "tapegrad/autograd/tape.h"

namespace tapegrad {

namespace {

// What a unary op's derivative is written in terms of: its input x, its output y, or neither.
enum class Saves { Input, Output, Nothing };

// y = f(x) on each element; dx = grad(dout, s), with s the saved x or y (undefined for
// Saves::Nothing), in differentiable ops.
template <class F, class Grad>
Tensor unary(const char* op, const Tensor& input, Saves saves, F f, Grad grad) {
  return run_op(op, [&] {
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
    if (!recording(x)) return out;
    const Tensor saved = saves == Saves::Input    ? x.detach()
                         : saves == Saves::Output ? out.detach()
                                                  : Tensor();
    return record(op, {x}, out,
                  {.backward =
                       [input = saves == Saves::Input ? x : Tensor(), saved, saves, grad](
                           const Tensor& dout, Grads& g) {
                         g.pass(0, grad(dout, saves == Saves::Output ? g.output(saved) : input));
                       }},
                  {{saves == Saves::Input ? "x" : "y", saved}});
  });
}

// out = f(a, b) with broadcasting; da = ga(dout, a, b) and db = gb(dout, a, b), each summed
// back to its operand's shape. Ops whose partials are constants (add, sub) pass kSavesInputs
// = false and keep no input alive.
template <bool kSavesInputs, class F, class GA, class GB>
Tensor binary(const char* op, const Tensor& a, const Tensor& b, F f, GA ga, GB gb) {
  return run_op(op, [&] {
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
    if (!recording(a, b)) return out;
    return record(
        op, {a, b}, out,
        {.backward =
             [a = kSavesInputs ? a : Tensor(), b = kSavesInputs ? b : Tensor(), a_shape = a.shape(),
              b_shape = b.shape(), ga, gb](const Tensor& dout, Grads& g) {
               if (g.wants(0)) g.pass(0, sum_to(ga(dout, a, b), a_shape));
               if (g.wants(1)) g.pass(1, sum_to(gb(dout, a, b), b_shape));
             }},
        {{"a", kSavesInputs ? a.detach() : Tensor()}, {"b", kSavesInputs ? b.detach() : Tensor()}});
  });
}

// y = scale * x + shift: the shared kernel of the scalar forms and neg.
Tensor affine(const char* op, const Tensor& x, double scale, double shift) {
  return unary(
      op, x, Saves::Nothing, [=](auto v) { return static_cast<decltype(v)>(scale * v + shift); },
      [=](const Tensor& d, const Tensor&) { return scale == 1 ? d : d * scale; });
}

// relu's gradient: d where y > 0, else 0 (0 at x = 0, as PyTorch)
Tensor relu_gate(const Tensor& d, const Tensor& y) { return masked_fill(d, eq(y, 0), 0); }

// The elements above (tril) or below (triu) a diagonal blocked; a masked_fill, whose derivative
// is theirs.
Tensor triangle(const char* op, const Tensor& x, int64_t diagonal, bool lower) {
  TG_CHECK(x.dim() >= 2, "{}: expected at least 2 dims, got shape {}", op, x.shape());
  const int64_t rows = x.size(-2), cols = x.size(-1);
  Tensor blocked = empty({rows, cols}, DType::Bool);
  bool* pb = blocked.data<bool>();
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j)
      pb[i * cols + j] = lower ? j - i > diagonal : j - i < diagonal;
  }
  return masked_fill(x, blocked, 0);
}

}  // namespace

// d(a+b)/da = 1, d(a+b)/db = 1
Tensor add(const Tensor& a, const Tensor& b) {
  return binary<false>(
      op_name("add"), a, b, [](auto x, auto y) { return x + y; },
      [](const auto& d, const auto&, const auto&) { return d; },
      [](const auto& d, const auto&, const auto&) { return d; });
}

// d(a-b)/da = 1, d(a-b)/db = -1
Tensor sub(const Tensor& a, const Tensor& b) {
  return binary<false>(
      op_name("sub"), a, b, [](auto x, auto y) { return x - y; },
      [](const auto& d, const auto&, const auto&) { return d; },
      [](const auto& d, const auto&, const auto&) { return -d; });
}

// d(ab)/da = b, d(ab)/db = a
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary<true>(
      op_name("mul"), a, b, [](auto x, auto y) { return x * y; },
      [](const auto& d, const auto&, const auto& y) { return d * y; },
      [](const auto& d, const auto& x, const auto&) { return d * x; });
}

// d(a/b)/da = 1/b, d(a/b)/db = -a/b^2
Tensor div(const Tensor& a, const Tensor& b) {
  return binary<true>(
      op_name("div"), a, b, [](auto x, auto y) { return x / y; },
      [](const auto& d, const auto&, const auto& y) { return d / y; },
      [](const auto& d, const auto& x, const auto& y) { return -(d * x / (y * y)); });
}

Tensor add(const Tensor& x, double s) { return affine(op_name("add"), x, 1.0, s); }
Tensor sub(const Tensor& x, double s) { return affine(op_name("sub"), x, 1.0, -s); }
Tensor mul(const Tensor& x, double s) { return affine(op_name("mul"), x, s, 0.0); }
Tensor div(const Tensor& x, double s) { return affine(op_name("div"), x, 1.0 / s, 0.0); }
Tensor neg(const Tensor& x) { return affine(op_name("neg"), x, -1.0, 0.0); }

// d exp(x) = exp(x) = y
Tensor exp(const Tensor& x) {
  return unary(
      op_name("exp"), x, Saves::Output, [](auto v) { return std::exp(v); },
      [](const auto& d, const auto& y) { return d * y; });
}

// d sin(x) = cos(x)
Tensor sin(const Tensor& x) {
  return unary(
      op_name("sin"), x, Saves::Input, [](auto v) { return std::sin(v); },
      [](const auto& d, const auto& x) { return d * cos(x); });
}

// d cos(x) = -sin(x)
Tensor cos(const Tensor& x) {
  return unary(
      op_name("cos"), x, Saves::Input, [](auto v) { return std::cos(v); },
      [](const auto& d, const auto& x) { return -(d * sin(x)); });
}

// d log(x) = 1/x
Tensor log(const Tensor& x) {
  return unary(
      op_name("log"), x, Saves::Input, [](auto v) { return std::log(v); },
      [](const auto& d, const auto& x) { return d / x; });
}

// d sqrt(x) = 1 / (2 sqrt(x)) = 1 / 2y
Tensor sqrt(const Tensor& x) {
  return unary(
      op_name("sqrt"), x, Saves::Output, [](auto v) { return std::sqrt(v); },
      [](const auto& d, const auto& y) { return d / (y + y); });
}

// d tanh(x) = 1 - tanh(x)^2 = 1 - y^2
Tensor tanh(const Tensor& x) {
  return unary(
      op_name("tanh"), x, Saves::Output, [](auto v) { return std::tanh(v); },
      [](const auto& d, const auto& y) { return d * (1 - y * y); });
}

// d relu(x) = 1 where y > 0, else 0
Tensor relu(const Tensor& x) {
  return unary(
      op_name("relu"), x, Saves::Output, [](auto v) { return v > 0 ? v : decltype(v){0}; },
      [](const auto& d, const auto& y) { return relu_gate(d, y); });
}

// gelu(x) = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2
// d gelu(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
Tensor gelu(const Tensor& x) {
  return unary(
      op_name("gelu"), x, Saves::Input, [](auto v) { return detail::gelu_of(v); },
      [](const auto& d, const auto& x) { return d * gelu_slope(x); });
}

Tensor gelu_slope(const Tensor& x) {
  const Tensor cdf = mul(add(erf(mul(x, 1 / std::numbers::sqrt2)), 1.0), 0.5);
  const Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), std::numbers::inv_sqrtpi / std::numbers::sqrt2);
  return add(cdf, mul(x, pdf));
}

// d erf(x) = 2 / sqrt(pi) exp(-x^2)
Tensor erf(const Tensor& x) {
  return unary(
      op_name("erf"), x, Saves::Input, [](auto v) { return std::erf(v); },
      [](const auto& d, const auto& x) {
        return d * exp(-(x * x)) * (2 * std::numbers::inv_sqrtpi);
      });
}

// d x^p = p x^(p-1)
Tensor pow(const Tensor& x, double p) {
  return unary(
      op_name("pow"), x, Saves::Input, [p](auto v) { return decltype(v)(std::pow(v, p)); },
      [p](const auto& d, const auto& x) { return d * pow(x, p - 1) * p; });
}

// d base^x = base^x ln(base) = y ln(base)
Tensor pow(double base, const Tensor& x) {
  TG_CHECK(base > 0, "pow: the base of a tensor exponent must be positive, got {}", base);
  const double ln_base = std::log(base);
  return unary(
      op_name("pow"), x, Saves::Output,
      [base](auto v) { return static_cast<decltype(v)>(std::pow(base, v)); },
      [ln_base](const auto& d, const auto& y) { return d * y * ln_base; });
}

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle("tril", x, diagonal, true); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle("triu", x, diagonal, false); }

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  return run_op(op_name("masked_fill"), [&] {
    TG_CHECK(mask.dtype() == DType::Bool, "masked_fill: mask must be bool, got {}", mask.dtype());
    TG_CHECK(broadcast_shapes("masked_fill", x.shape(), mask.shape()) == x.shape(),
             "masked_fill: mask of shape {} does not broadcast to the input's shape {}",
             mask.shape(), x.shape());
    const Shape sm = broadcast_strides(mask.shape(), mask.strides(), x.shape());
    Tensor out = empty(x.shape(), x.dtype());
    dispatch_all(x.dtype(), [&](auto tag) {  // any dtype: masks are filled too
      using T = decltype(tag);
      const T* px = x.data<T>();
      const bool* pm = mask.data<bool>();
      T* po = out.data<T>();
      const auto v = static_cast<T>(value);
      parallel_for_each_offset<3>(x.shape(), {&out.strides(), &x.strides(), &sm}, kGrainElements,
                                  [&](const auto& o) { po[o[0]] = pm[o[2]] ? v : px[o[1]]; });
    });
    if (!recording(x)) return out;
    // dx = dout where the mask is false, 0 where it is true
    return record(op_name("masked_fill"), {x}, out,
                  {.backward = [mask](const Tensor& dout,
                                      Grads& g) { g.pass(0, masked_fill(dout, mask, 0)); },
                   .allow_inf = std::isinf(value)},
                  {{"mask", mask}});
  });
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return run_op(op_name("where"), [&] {
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
      parallel_for_each_offset<4>(
          shape, {&out.strides(), &sc, &sa, &sb}, kGrainElements,
          [&](const auto& o) { po[o[0]] = pc[o[1]] ? pa[o[2]] : pb[o[3]]; });
    });
    if (!recording(a, b)) return out;
    // da = dout where cond, db = dout where not cond; each summed to its operand's shape
    return record(
        op_name("where"), {a, b}, out,
        {.backward =
             [cond, a_shape = a.shape(), b_shape = b.shape()](const Tensor& dout, Grads& g) {
               const Tensor zero = zeros_like(dout);
               if (g.wants(0)) g.pass(0, sum_to(where(cond, dout, zero), a_shape));
               if (g.wants(1)) g.pass(1, sum_to(where(cond, zero, dout), b_shape));
             }},
        {{"cond", cond}});
  });
}

namespace {
// pred(x, value) on each element, in double, into a bool tensor
template <class Pred>
Tensor compare(const Tensor& x, double value, Pred pred) {
  Tensor out = empty(x.shape(), DType::Bool);
  bool* po = out.data<bool>();
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    for_each_offset<2>(x.shape(), {&out.strides(), &x.strides()}, [&](const auto& o) {
      po[o[0]] = pred(static_cast<double>(px[o[1]]), value);
    });
  });
  return out;
}

// f(a, b) on each pair of elements of one dtype, broadcast together: a bool tensor (kToBool)
// or one of their dtype. The ops that are not differentiable.
template <bool kToBool, class F>
Tensor pairwise(const char* op, const Tensor& a, const Tensor& b, F f) {
  TG_CHECK(a.dtype() == b.dtype(), "{}: dtypes differ: {} and {}", op, a.dtype(), b.dtype());
  const Shape shape = broadcast_shapes(op, a.shape(), b.shape());
  const Shape sa = broadcast_strides(a.shape(), a.strides(), shape);
  const Shape sb = broadcast_strides(b.shape(), b.strides(), shape);
  Tensor out = empty(shape, kToBool ? DType::Bool : a.dtype());
  dispatch_all(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Out = std::conditional_t<kToBool, bool, T>;
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    Out* po = out.data<Out>();
    for_each_offset<3>(shape, {&out.strides(), &sa, &sb},
                       [&](const auto& o) { po[o[0]] = f(pa[o[1]], pb[o[2]]); });
  });
  return out;
}
template <class Pred>
Tensor compare(const char* op, const Tensor& a, const Tensor& b, Pred pred) {
  return pairwise<true>(op, a, b, pred);
}
}  // namespace

Tensor eq(const Tensor& x, double v) { return compare(x, v, std::equal_to<>()); }
Tensor ne(const Tensor& x, double v) { return compare(x, v, std::not_equal_to<>()); }
Tensor lt(const Tensor& x, double v) { return compare(x, v, std::less<>()); }
Tensor le(const Tensor& x, double v) { return compare(x, v, std::less_equal<>()); }
Tensor gt(const Tensor& x, double v) { return compare(x, v, std::greater<>()); }
Tensor ge(const Tensor& x, double v) { return compare(x, v, std::greater_equal<>()); }
Tensor eq(const Tensor& a, const Tensor& b) { return compare("eq", a, b, std::equal_to<>()); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("ne", a, b, std::not_equal_to<>()); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("lt", a, b, std::less<>()); }
Tensor le(const Tensor& a, const Tensor& b) { return compare("le", a, b, std::less_equal<>()); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare("gt", a, b, std::greater<>()); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare("ge", a, b, std::greater_equal<>()); }

Tensor floor_divide(const Tensor& a, const Tensor& b) {
  TG_CHECK(a.dtype() != DType::Bool, "floor_divide: expected numbers, got bool");
  return pairwise<false>("floor_divide", a, b, [](auto x, auto y) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) {
      return std::floor(x / y);
    } else if constexpr (std::is_same_v<T, bool>) {
      return x;  // refused above
    } else {
      TG_CHECK(y != 0, "floor_divide: integer division by zero");
      return static_cast<T>(x / y - ((x % y != 0) && ((x < 0) != (y < 0))));  // down, not to 0
    }
  });
}

Tensor logical_or(const Tensor& a, const Tensor& b) {
  TG_CHECK(a.dtype() == DType::Bool && b.dtype() == DType::Bool,
           "logical_or: operands must be bool, got {} and {}", a.dtype(), b.dtype());
  return pairwise<true>("logical_or", a, b, [](auto x, auto y) { return x || y; });
}

}  // namespace tapegrad
