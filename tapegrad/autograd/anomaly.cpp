// Anomaly detection's scans of outputs and gradients for NaN and Inf (anomaly.h).
#include "tapegrad/autograd/anomaly.h"

#include <algorithm>
#include <cmath>
#include <span>

namespace tapegrad {

namespace {

// "NaN" or "Inf", what t holds that is not finite (a NaN before an Inf), or null.
const char* non_finite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return nullptr;
  const Tensor c = t.contiguous();
  return dispatch_floating("anomaly", c.dtype(), [&](auto tag) -> const char* {
    using T = decltype(tag);
    const char* found = nullptr;
    for (const T v : std::span(c.data<T>(), static_cast<size_t>(c.numel()))) {
      if (std::isnan(v)) return "NaN";
      if (std::isinf(v)) found = "Inf";
    }
    return found;
  });
}

}  // namespace

void check_forward_anomaly(const char* op, const std::vector<Tensor>& inputs,
                           const std::vector<Tensor*>& outs, const std::vector<Shape>& input_shapes,
                           bool allow_inf) {
  for (const Tensor* out : outs) {
    const char* found = non_finite(*out);
    if (!found || (found[0] == 'I' && allow_inf)) continue;
    // an Inf counts only from finite inputs
    TG_CHECK(found[0] == 'I' && std::any_of(inputs.begin(), inputs.end(), non_finite),
             "anomaly: forward of op '{}' (inputs {}) produced {}", op,
             fmt::join(input_shapes, ", "), found[0] == 'N' ? "NaN" : "Inf from finite inputs");
  }
}

void check_gradient_anomaly(const char* op, const std::vector<Shape>& input_shapes,
                            const std::vector<std::shared_ptr<GradNode>>& inputs) {
  for (size_t k = 0; k < inputs.size(); ++k) {
    const GradNode* in = inputs[k].get();
    const char* found = in ? non_finite(in->pending) : nullptr;
    TG_CHECK(!found,
             "anomaly: backward of op '{}' (inputs {}) produced {} in the gradient of input {} {}, "
             "which came from {}",
             op, fmt::join(input_shapes, ", "), found, k, in->shape,
             in->op ? fmt::format("op '{}'", in->op) : std::string("a leaf"));
  }
}

}  // namespace tapegrad
