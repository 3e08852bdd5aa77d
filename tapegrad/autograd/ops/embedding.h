// Embedding lookup: rows of a weight matrix gathered by integer ids.
#pragma once

#include <optional>

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// weight [V, C], ids int64 of any shape -> [*ids.shape, C]. Every id must be in [0, V).
// Rows looked up by padding_idx receive no gradient, as in torch.nn.Embedding.
Tensor embedding(const Tensor& weight, const Tensor& ids,
                 std::optional<int64_t> padding_idx = std::nullopt);

}  // namespace tapegrad
