// gradcheck: compares the gradients the tape computes with central finite differences.
//
// f maps the inputs to one output tensor. To check every output element at once, gradcheck
// differentiates the scalar L = sum(f(x) * R), with R a fixed random tensor: dL/dx from one
// backward() against (L(x + h e_i) - L(x - h e_i)) / 2h for each checked input element i.
// Inputs must be float64 (the differences need the precision); int64/bool inputs (ids, masks)
// and float inputs that do not require grad are passed through unchecked.
//
// The inputs are used in place: their grads are reset, and each checked element is perturbed
// and then restored. So a module is checked by passing its parameters as the inputs and
// ignoring the argument in f: gradcheck([&](auto&) { return model.forward(x); },
// model.parameters()); nn::gradcheck_module (tapegrad/check/gradcheck_module.h) does that with the
// parameters' names.
//
// f is evaluated twice at the unperturbed inputs first: finite differences of a function that
// changes from call to call (dropout left on) measure noise, so such an f fails with a hint.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

struct GradcheckOptions {
  double step = 1e-6;  // h
  double atol = 1e-7;  // pass when |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-5;
  int64_t max_per_input = 200;  // check a seeded sample of this many elements per larger input
  uint64_t seed = 0;            // for R and the sample
  // Names of the inputs, for messages ("encoder.layers.0.norm1.weight[3]"); empty: "input 2".
  std::vector<std::string> names{};
};

struct GradcheckResult {
  bool ok = true;
  int64_t elements_checked = 0;
  // The worst element (largest error relative to the tolerance), for the message.
  size_t input = 0;
  int64_t index = -1;  // flat index into that input
  double analytic = 0;
  double numeric = 0;
  double error = 0;   // |analytic - numeric| / (atol + rtol * |numeric|); > 1 fails
  std::string where;  // the worst element by name and index: "norm1.weight[3]", "input 0[1, 2]"
  // Why the check cannot be trusted, when gradcheck can tell: f is not deterministic (dropout
  // in training mode is the usual cause). Empty otherwise.
  std::string hint;
  // "norm1.weight[3]: analytic 1.5 numeric 1.2 (3000x tolerance)", then the hint; or "ok".
  std::string message() const;
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

// The gradient of the gradient, against finite differences of the analytic gradient: the
// first-order gradients of f(x) seeded with a random v, grad({f(x)}, x, {v}, create_graph),
// are gradchecked as a function of x and v (they are linear in v, so v is checked too; it
// is the last input in messages, named "grad_output"). Passes when every op on the way has a
// correct formula for its gradient and correct kernels for that formula's ops.
GradcheckResult gradgradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options = {});

}  // namespace tapegrad
