// grad(), as torch.autograd.grad: the gradients of outputs with respect to chosen inputs,
// returned rather than summed into .grad(), and under create_graph themselves differentiable,
// which is how second and higher derivatives are taken (examples/second_order.cpp).
#pragma once

#include <vector>

#include "tapegrad/autograd/tape.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

struct GradOptions {
  bool retain_graph = false;  // keep the graph for another backward (default: create_graph)
  bool create_graph = false;  // record the backward, so the gradients are differentiable
  bool allow_unused = false;  // an input the outputs do not depend on gets an undefined tensor
};

// The gradients of sum_k <outputs[k], grad_outputs[k]> with respect to each input, returned
// in the inputs' order; no tensor's .grad() changes. grad_outputs may be empty when every
// output has one element (the seed is 1). Only the part of the graph between the outputs and
// the inputs runs. An input the outputs do not depend on is an error unless allow_unused.
inline std::vector<Tensor> grad(const std::vector<Tensor>& outputs,
                                const std::vector<Tensor>& inputs,
                                const std::vector<Tensor>& grad_outputs = {},
                                GradOptions options = {}) {
  TG_CHECK(!outputs.empty(), "grad: no outputs given");
  TG_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
           "grad: {} grad_outputs for {} outputs", grad_outputs.size(), outputs.size());
  detail::WalkOptions walk{.create_graph = options.create_graph,
                           .retain_graph = options.retain_graph || options.create_graph,
                           .accumulate = false};
  for (size_t i = 0; i < inputs.size(); ++i) {
    TG_CHECK(inputs[i].defined() && inputs[i].requires_grad(),
             "grad: input {} does not require grad", i);
    walk.targets.push_back(inputs[i].impl().node.get());
  }
  // no grad_outputs: undefined seeds, each 1 for its one-element output
  std::vector<Tensor> grads = detail::reverse_pass(
      outputs, grad_outputs.empty() ? std::vector<Tensor>(outputs.size()) : grad_outputs, walk);
  for (size_t i = 0; i < inputs.size(); ++i) {
    TG_CHECK(grads[i].defined() || options.allow_unused,
             "grad: input {} (shape {}) is not used by the outputs; pass allow_unused to get an "
             "undefined tensor for it",
             i, inputs[i].shape());
  }
  return grads;
}

}  // namespace tapegrad
