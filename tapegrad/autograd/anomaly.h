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

// Throws when a gradient the backward of `op` just delivered to one of its inputs (their nodes,
// null where none is wanted) holds a NaN or an Inf, naming the input and the op that made it.
void check_gradient_anomaly(const char* op, const std::vector<Shape>& input_shapes,
                            const std::vector<std::shared_ptr<GradNode>>& inputs);

}  // namespace tapegrad
