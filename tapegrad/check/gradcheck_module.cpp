// gradcheck_module: the module's named parameters as gradcheck's inputs.
#include "tapegrad/check/gradcheck_module.h"

namespace tapegrad::nn {

GradcheckResult gradcheck_module(const Module& module, const std::function<Tensor()>& f,
                                 GradcheckOptions options) {
  std::vector<Tensor> inputs;
  options.names.clear();
  for (const auto& [name, p] : module.named_parameters()) {
    TG_CHECK(p.dtype() == DType::Float64,
             "gradcheck_module: parameter '{}' is {}: finite differences need float64; call "
             "module.to(DType::Float64)",
             name, p.dtype());
    TG_CHECK(p.requires_grad(),
             "gradcheck_module: parameter '{}' does not require grad, so it would not be "
             "checked (was a new tensor assigned over it? assign into it instead)",
             name);
    inputs.push_back(p);
    options.names.push_back(name);
  }
  TG_CHECK(!inputs.empty(), "gradcheck_module: the module has no parameters");
  return gradcheck([&](const std::vector<Tensor>&) { return f(); }, inputs, options);
}

}  // namespace tapegrad::nn
