// Hooks on a tensor's gradient (Tensor::register_hook): each tensor's GradNode keeps its list,
// and the walk passes the tensor's complete gradient through it before the gradient flows on.
#pragma once

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// grad passed through each hook in turn, each on the previous one's result (hooks is a copy:
// a hook may remove itself); a replacement must have the tensor's shape and dtype. Outside
// create_graph a replacement is copied: the walk adds into the buffer it hands on, not into the
// hook's.
inline Tensor run_hooks(GradHooks hooks, const Tensor& grad, const Shape& shape, DType dtype,
                        bool create_graph) {
  Tensor g = grad;
  for (const auto& [id, hook] : hooks) {
    Tensor r = hook(g);
    if (!r.defined()) continue;
    TG_CHECK(r.shape() == shape && r.dtype() == dtype,
             "backward: a hook returned a gradient of shape {} and dtype {} for a tensor of "
             "shape {} and dtype {}",
             r.shape(), r.dtype(), shape, dtype);
    g = create_graph ? r : r.clone();
  }
  return g;
}

}  // namespace tapegrad
