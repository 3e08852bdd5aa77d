// The fast-kernel contract: how a kernel writes a first-order gradient straight into its
// buffer, where a backward passes a tensor (Grads::pass, tape.h). For the fast room
// (tapegrad/autograd/fast/) and a custom op's author (docs/custom_ops.md), not for a learner's
// first read. Such a kernel is an op's Derivative::fast: the same gradient as the op's backward
// or reference (a test holds them equal), never run under create_graph or a
// ReferenceModeGuard. It asks Grads::write(i, writes) for input i's buffer, under the tape's
// one rule: the first writer of a buffer assigns, every later one adds.
#pragma once

#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

// What a fast kernel promises about the elements of input i's gradient it writes: Every
// element once (the first writer assigns into an uninitialised buffer), or Some (a scatter or a
// sum: the buffer is zero-filled and every writer adds).
enum class Writes { Every, Some };

// Input i's gradient buffer, as Grads::write gives it, and whether this writer assigns (the
// first) or adds.
struct GradBuffer {
  Tensor& grad;
  bool first;
};

// Calls body(store) with store(dst, v) assigning (dst = v) when `assign` and adding (dst += v)
// otherwise: a backward writes its loop once, for a GradBuffer, and the loop is compiled for
// each case without a branch inside.
template <class Body>
void assign_or_add(bool assign, Body&& body) {
  if (assign) {
    body([](auto& dst, auto v) { dst = v; });
  } else {
    body([](auto& dst, auto v) { dst += v; });
  }
}

}  // namespace tapegrad
