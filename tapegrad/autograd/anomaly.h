// Anomaly detection's checks (DetectAnomalyGuard, modes.h): the tape runs them on each op's
// outputs as it records the op, and on each gradient a backward delivers.
#pragma once

#include <vector>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// Throws when an output of `op` (whose inputs had `input_shapes`) holds a NaN, or an Inf while
// every input is finite; allow_inf exempts an intended infinity (masked_fill's).
void check_forward_anomaly(const char* op, const std::vector<Tensor>& inputs,
                           const std::vector<Tensor*>& outs, const std::vector<Shape>& input_shapes,
                           bool allow_inf);

// Throws when `grad`, the gradient the backward of `op` gave its input k (of shape `shape`,
// made by op `producer`, or a leaf when null), holds a NaN or an Inf.
void check_gradient_anomaly(const char* op, const std::vector<Shape>& input_shapes, size_t k,
                            const Tensor& grad, const Shape& shape, const char* producer);

}  // namespace tapegrad
