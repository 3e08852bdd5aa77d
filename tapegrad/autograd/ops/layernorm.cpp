// Layer normalisation (Ba, Kiros & Hinton 2016) as its definition in primitives: each row's
// mean and variance, the row centred and scaled, then the affine weight and bias. Its
// gradients of every order come from differentiating this. The fused kernels that compute the
// same faster are the fast room's (fast/layernorm.cpp).
#include "tapegrad/autograd/ops/layernorm.h"

#include "tapegrad/autograd/ops/dropout.h"
#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/ops/registry.h"

namespace tapegrad {

namespace {

// The checks layer_norm and add_layer_norm share, their messages prefixed by `op`.
void check_norm(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                double eps) {
  TG_CHECK(input.dim() >= 1, "{}: input must have rank >= 1, got shape {}", op, input.shape());
  TG_CHECK(eps > 0, "{}: eps must be positive, got {}", op, eps);
  const int64_t C = input.size(-1);
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    TG_CHECK(p->shape() == Shape{C}, "{}: {} has shape {}, expected [{}] for input {}", op,
             p == &weight ? "weight" : "bias", p->shape(), C, input.shape());
    TG_CHECK(p->dtype() == input.dtype(), "{}: dtypes differ: input {} and {} {}", op,
             input.dtype(), p == &weight ? "weight" : "bias", p->dtype());
  }
}

// add_layer_norm (keep_sum false: the norm only) and add_and_layer_norm, named `op`: the checks,
// the dropout mask's key drawn when it applies, then the fast room or the reference.
SumNorm add_norm(const char* op, const Tensor& x, const Tensor& d, const Tensor& weight,
                 const Tensor& bias, double eps, const DropoutOptions& dropout, bool keep_sum) {
  check_norm(op, x, weight, bias, eps);
  TG_CHECK(x.shape() == d.shape() && x.dtype() == d.dtype(),
           "{}: x {} {} and d {} {} must have one shape and dtype", op, x.dtype(), x.shape(),
           d.dtype(), d.shape());
  const auto [p, key] = draw_dropout(op, dropout, "dropout");
  const auto reference = [](const char*, const Tensor& x, const Tensor& d, const Tensor& weight,
                            const Tensor& bias, double eps, double p, uint64_t key, bool) {
    return add_and_layer_norm_reference(x, d, weight, bias, eps, p, key);
  };
  return run_op(op, &FastOps::add_norm, reference, op, x, d, weight, bias, eps, p, key, keep_sum);
}

}  // namespace

Tensor layer_norm_reference(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const Tensor centred = x - mean(x, {-1}, true);
  const Tensor var = mean(centred * centred, {-1}, true);
  Tensor y = centred / sqrt(var + eps);
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

SumNorm add_and_layer_norm_reference(const Tensor& x, const Tensor& d, const Tensor& weight,
                                     const Tensor& bias, double eps, double p, uint64_t key) {
  const Tensor sum = x + dropout(d, p, key);
  return {sum, layer_norm_reference(sum, weight, bias, eps)};
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_norm("layer_norm", x, weight, bias, eps);
  return run_op(op_name("layer_norm"), &FastOps::layer_norm, layer_norm_reference, x, weight, bias,
                eps);
}

Tensor add_layer_norm(const Tensor& x, const Tensor& d, const Tensor& weight, const Tensor& bias,
                      double eps, const DropoutOptions& dropout) {
  return add_norm(op_name("add_layer_norm"), x, d, weight, bias, eps, dropout, false).norm;
}

SumNorm add_and_layer_norm(const Tensor& x, const Tensor& d, const Tensor& weight,
                           const Tensor& bias, double eps, const DropoutOptions& dropout) {
  return add_norm(op_name("add_and_layer_norm"), x, d, weight, bias, eps, dropout, true);
}

}  // namespace tapegrad
