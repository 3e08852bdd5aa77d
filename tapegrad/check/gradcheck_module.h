// gradcheck for a module: every parameter checked by name, and the mistakes that make a
// module's gradcheck lie caught before it runs.
#pragma once

#include <functional>

#include "tapegrad/check/gradcheck.h"
#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

// Checks the gradient of f() (a forward through `module`) with respect to every parameter of
// the module; a failure names the element, "encoder.layers.0.norm1.weight[3]". Errors before
// anything runs: a parameter that is not float64 (module.to(DType::Float64)), or one that does
// not require grad (a tensor assigned over a registered parameter, `layer.weight = ...`, is a
// new tensor: assign into it, or set_requires_grad(true) and register it). A module in training
// mode whose f changes from call to call (dropout) fails with a hint saying so.
GradcheckResult gradcheck_module(const Module& module, const std::function<Tensor()>& f,
                                 GradcheckOptions options = {});

}  // namespace tapegrad::nn
