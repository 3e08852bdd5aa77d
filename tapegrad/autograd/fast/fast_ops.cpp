// The fast room's table (ops/registry.h): what the ops of ops/ run when the library is built with
// the fast room (-DTAPEGRAD_FAST=ON, the default).
#include "tapegrad/autograd/fast/fast_room.h"

namespace tapegrad {

const FastOps* installed_fast_ops() {
  static const FastOps ops{
      .matmul = fast_matmul,
      .linear = fast_linear,
      .layer_norm = fast_layer_norm,
      .add_norm = fast_add_norm,
      .attention = fast_attention,
      .cross_entropy = fast_cross_entropy,
      .softmax = fast_softmax,
      .masked_softmax = fast_masked_softmax,
      .run_sums = fast_run_sums,
  };
  return &ops;
}

}  // namespace tapegrad
