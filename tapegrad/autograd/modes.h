// The tape's per-thread modes, each set for a scope by a guard: whether ops are recorded (grad
// mode), whether NaN and Inf are hunted (anomaly), whether entries keep what the drawing shows
// (details), whether the fast room may run (reference), and the precision of float32 products
// (autocast). Each thread has its own, as each has its own tape.
#pragma once

#include "tapegrad/autograd/bfloat16.h"
#include "tapegrad/autograd/dtype.h"

namespace tapegrad {

namespace detail {
// This thread's modes, which the guards below set.
struct Modes {
  bool grad = true;
  bool anomaly = false;
  bool details = false;
  bool reference = false;
  Precision autocast = Precision::Float32;
};
inline Modes& modes() {
  thread_local Modes modes;
  return modes;
}
}  // namespace detail

// Sets one of this thread's modes (kMode, a field of detail::Modes) for its scope, to kValue
// or the value given, and restores the previous value on exit.
template <auto kMode, auto kValue>
class ScopedMode {
 public:
  using Value = decltype(kValue);
  explicit ScopedMode(Value value = kValue) : previous_(detail::modes().*kMode) {
    detail::modes().*kMode = value;
  }
  ~ScopedMode() { detail::modes().*kMode = previous_; }
  ScopedMode(const ScopedMode&) = delete;
  ScopedMode& operator=(const ScopedMode&) = delete;

 private:
  Value previous_;
};

// Grad mode: NoGradGuard turns recording off for its scope (inference, optimizer updates);
// EnableGradGuard, like torch.enable_grad, turns it on inside a NoGradGuard.
inline bool grad_enabled() { return detail::modes().grad; }
using NoGradGuard = ScopedMode<&detail::Modes::grad, false>;
using EnableGradGuard = ScopedMode<&detail::Modes::grad, true>;

// Anomaly detection, like torch.autograd.detect_anomaly: while a DetectAnomalyGuard lives, the
// first NaN or Inf an op's output or a backward's gradient holds throws an Error naming the op,
// its input shapes and, for a gradient, the input and the op that made it (anomaly.h). An Inf
// counts only from finite inputs (a -inf mask flowing through softmax is no anomaly).
inline bool anomaly_enabled() { return detail::modes().anomaly; }
using DetectAnomalyGuard = ScopedMode<&detail::Modes::anomaly, true>;

// Details mode: while a TapeDetailsGuard (or a DetectAnomalyGuard) lives, each entry also keeps
// its inputs' shapes and what it saved, which the tape's drawing shows (viz/tape_drawing.h).
inline bool tape_details() { return detail::modes().details || detail::modes().anomaly; }
using TapeDetailsGuard = ScopedMode<&detail::Modes::details, true>;

// Reference mode: while a ReferenceModeGuard lives, fast_ops() is null: composites run as their
// references and no fast kernel runs. What the fast room is tested equal to.
inline bool reference_mode() { return detail::modes().reference; }
using ReferenceModeGuard = ScopedMode<&detail::Modes::reference, true>;

// Autocast, like PyTorch's torch.autocast("cpu", dtype=torch.bfloat16): while an AutocastGuard
// lives, the matrix products of float32 ops (matmul, and so linear and attention) take their
// operands rounded to bfloat16 (bfloat16.h) and sum in float32; everything else (softmax,
// layer norm, losses, sums, the parameters, the optimizer) stays float32. An entry keeps the
// precision it was recorded in, and its backward runs in that precision, inside the guard or
// not: the gradient's products are bfloat16 products too.
using AutocastGuard = ScopedMode<&detail::Modes::autocast, Precision::BFloat16>;

// The precision a matrix product of `dtype` operands runs in here: the autocast's for float32,
// float64 always in full (gradcheck's products stay exact).
inline Precision product_precision(DType dtype) {
  return dtype == DType::Float32 ? detail::modes().autocast : Precision::Float32;
}

}  // namespace tapegrad
