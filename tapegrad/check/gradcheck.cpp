// gradcheck: the analytic gradients of one backward against central finite differences, element
// by element, with the worst element named; see gradcheck.h.
#include "tapegrad/check/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "tapegrad/autograd/grad.h"
#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/autograd/random.h"
#include "tapegrad/autograd/tape.h"

namespace tapegrad {

std::string GradcheckResult::message() const {
  if (ok) return fmt::format("ok ({} elements checked)", elements_checked);
  if (index < 0) return hint;
  std::string m = fmt::format("{}: analytic {:.10g} numeric {:.10g} ({:.3g}x tolerance)", where,
                              analytic, numeric, error);
  return hint.empty() ? m : m + "; " + hint;
}

namespace {

// "name[i, j]" for flat index k of a tensor of this shape ("name[k]" in one dimension).
std::string element_name(const std::string& name, const Shape& shape, int64_t k) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = k % shape[d];
    k /= shape[d];
  }
  return fmt::format("{}[{}]", name, fmt::join(index, ", "));
}

// Refuses what finite differences cannot check: a float32 input, or an input requiring grad
// that is not a contiguous leaf (perturbed in place).
void check_inputs(const std::vector<Tensor>& inputs,
                  const std::function<std::string(size_t)>& name) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    TG_CHECK(!is_floating(x.dtype()) || x.dtype() == DType::Float64,
             "gradcheck: {} is {}: finite differences need float64; convert the inputs with "
             ".to(DType::Float64) (a module with module.to(DType::Float64))",
             name(i), x.dtype());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    TG_CHECK(!x.requires_grad() || (x.is_leaf() && x.is_contiguous()),
             "gradcheck: {} must be a contiguous leaf to be perturbed in place", name(i));
  }
}

// The elements of a tensor of n to perturb: all, or a seeded sample of `max` of them
// (Fisher-Yates on the prefix).
std::vector<int64_t> elements_to_check(int64_t n, int64_t max, Generator& gen) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (n > max) {
    for (int64_t k = 0; k < max; ++k) {
      std::swap(order[k], order[k + static_cast<int64_t>(gen.below(n - k))]);
    }
    order.resize(max);
  }
  return order;
}

// Each chosen element of input i: the central difference (loss(x + h) - loss(x - h)) / 2h
// beside the tape's gradient; the worst so far is kept in result.
void compare_input(size_t i, Tensor& x, const std::function<double()>& loss,
                   const std::string& name, const GradcheckOptions& options, Generator& gen,
                   GradcheckResult& result) {
  const Tensor grad = x.grad();
  double* px = x.data<double>();
  for (int64_t k : elements_to_check(x.numel(), options.max_per_input, gen)) {
    const double saved = px[k];
    px[k] = saved + options.step;
    const double up = loss();
    px[k] = saved - options.step;
    const double down = loss();
    px[k] = saved;
    const double numeric = (up - down) / (2 * options.step);
    const double analytic = grad.defined() ? grad.data<double>()[k] : 0.0;
    double error = std::abs(analytic - numeric) / (options.atol + options.rtol * std::abs(numeric));
    if (std::isnan(error)) error = INFINITY;  // a NaN on either side always fails
    ++result.elements_checked;
    if (error > result.error || result.index < 0) {
      result.input = i;
      result.index = k;
      result.where = element_name(name, x.shape(), k);
      result.analytic = analytic;
      result.numeric = numeric;
      result.error = error;
    }
  }
}

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  TG_CHECK(options.names.empty() || options.names.size() == inputs.size(),
           "gradcheck: {} names for {} inputs", options.names.size(), inputs.size());
  const auto name = [&](size_t i) {
    return options.names.empty() ? fmt::format("input {}", i) : options.names[i];
  };
  check_inputs(inputs, name);
  Generator gen(options.seed);
  std::vector<Tensor> xs = inputs;  // handles: perturbing them perturbs the caller's tensors
  for (Tensor& x : xs) {
    if (x.requires_grad()) x.zero_grad();
  }
  // the loss is the output projected on a fixed random direction: one backward checks every
  // output element at once
  Tensor projection;
  auto loss = [&]() {
    Tensor out = f(xs);
    TG_CHECK(out.dtype() == DType::Float64, "gradcheck: f returned {}, expected float64",
             out.dtype());
    if (!projection.defined()) projection = uniform(out.shape(), -1.0, 1.0, gen, DType::Float64);
    TG_CHECK(out.shape() == projection.shape(), "gradcheck: f's output shape changed from {} to {}",
             projection.shape(), out.shape());
    return sum(mul(out, projection));
  };

  Tensor l = loss();
  TG_CHECK(l.requires_grad(), "gradcheck: the output does not depend on any input requiring grad");
  l.backward();

  GradcheckResult result;
  NoGradGuard no_grad;
  const double first = l.item(), again = loss().item();
  if (first != again) {
    result.ok = false;
    result.hint = fmt::format(
        "gradcheck: f is not deterministic: the same inputs gave {:.17g}, then {:.17g}; is "
        "dropout on (a module in training mode: call eval(), or set its dropout to 0)?",
        first, again);
    return result;
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].requires_grad()) continue;
    compare_input(
        i, xs[i], [&] { return loss().item(); }, name(i), options, gen, result);
  }
  result.ok = result.error <= 1.0;
  return result;
}

}  // namespace tapegrad

namespace tapegrad {

GradcheckResult gradgradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options) {
  Tensor v;
  {
    NoGradGuard no_grad;
    const Tensor out = f(inputs);
    Generator gen(options.seed + 1);
    v = uniform(out.shape(), -1.0, 1.0, gen, DType::Float64);
  }
  v.set_requires_grad(true);
  std::vector<Tensor> all = inputs;
  all.push_back(v);
  GradcheckOptions checked = options;
  if (!checked.names.empty()) checked.names.push_back("grad_output");
  // x, v -> the first-order gradients of <f(x), v> with respect to the x requiring grad, flat
  const auto first_order = [&f](const std::vector<Tensor>& xs) {
    const EnableGradGuard enable;  // gradcheck evaluates this under a NoGradGuard
    const std::vector<Tensor> x(xs.begin(), xs.end() - 1);
    std::vector<Tensor> wrt;
    for (const Tensor& t : x) {
      if (t.requires_grad()) wrt.push_back(t);
    }
    const std::vector<Tensor> grads =
        grad({f(x)}, wrt, {xs.back()}, {.create_graph = true, .allow_unused = true});
    std::vector<Tensor> flat;
    for (size_t i = 0; i < grads.size(); ++i) {
      flat.push_back(grads[i].defined() ? reshape(grads[i], {-1})
                                        : zeros({wrt[i].numel()}, DType::Float64));
    }
    return concat(flat, 0);
  };
  return gradcheck(first_order, all, checked);
}

}  // namespace tapegrad
