// The tape: reverse-mode autograd as a flat list of op records in execution order (the book,
// docs/tape.md). A differentiable op on an input that requires grad calls record(), which
// appends one TapeEntry and makes the op's output a non-leaf whose GradNode owns the entry.
// backward() walks the tape in reverse: an entry whose outputs received gradients computes its
// inputs' (Grads), then is released with every buffer it saved. Each op states its derivative
// once (Derivative; docs/gradients.md). Ownership runs backwards like the graph (an output's
// node owns its entry, the entry its input nodes; the tape holds weak references), so a graph
// dropped without backward() frees itself.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/bfloat16.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

struct TapeEntry;

// A hook on a tensor's gradient (Tensor::register_hook): returns a replacement, or an undefined
// tensor to leave it as it is.
using GradHook = std::function<Tensor(const Tensor& grad)>;

struct GradNode {
  Shape shape;
  DType dtype = DType::Float32;
  // What .grad() shows: a leaf's gradient summed over backward() calls, or a non-leaf's when
  // retains_grad. Undefined until a backward reaches it.
  Tensor grad;
  // This backward's gradient, summed while the walk runs; handed on and cleared once complete.
  Tensor pending;
  std::shared_ptr<TapeEntry> grad_fn;  // the entry that produced this tensor; null for a leaf
  bool retains_grad = false;
  std::vector<std::pair<uint64_t, GradHook>> hooks;  // by handle id, in registration order
};

struct Walk;

// What a fast kernel promises about the elements of input i's gradient it writes: Every
// element once (the first writer assigns into an uninitialised buffer), or Some (a scatter or a
// sum: the buffer is zero-filled and every writer adds).
enum class Writes { Every, Some };

// The gradients a backward delivers, one per op input, under one rule (docs/gradients.md):
// within one walk, the first gradient delivered to a tensor becomes its gradient buffer, and
// every later one is added into it. pass(i, t) hands on a tensor; write(i, writes) gives a fast
// kernel the buffer to write and whether it is the first writer.
class Grads {
 public:
  Grads(TapeEntry& entry, Walk& walk, const std::vector<Tensor>& douts);
  // Whether input i requires grad; skip computing what nobody asked for.
  bool wants(size_t i) const;

  struct Buffer {
    Tensor& grad;
    bool first;  // assign rather than add
  };
  Buffer write(size_t i, Writes writes);

  // Hands g (input i's shape and dtype, any layout) on as input i's gradient. Under
  // create_graph the sum of gradients is itself recorded.
  void pass(size_t i, const Tensor& g);

  // The op's output k, from a saved handle to it (out.detach() captured at record time), joined
  // again to the graph, so a gradient written in terms of the output (softmax's y, exp's y)
  // flows back through this op when it is differentiated again.
  Tensor output(const Tensor& saved, size_t k = 0) const;

  // The gradient of the op's output k in this walk: what the backward function receives as
  // dout for output 0. An op with several outputs runs its backward once any of them received
  // a gradient; the others' are then undefined (as if zero).
  const Tensor& dout(size_t k) const;

  // `value` (input i's shape and dtype, what the op saved) joined to input i's place in the
  // graph, as output() does for the output: a reference recomputed from its saved inputs
  // differentiates through them. An input that needs no grad gives value as it is.
  Tensor input(size_t i, const Tensor& value) const;

 private:
  // Each call names itself in the error a wrong index gets: "backward of 'my_op': write(2),
  // but the op has 2 input(s)".
  void check_index(size_t i, const char* call) const;
  GradNode& node(size_t i, const char* call);
  TapeEntry& entry_;
  Walk& walk_;
  const std::vector<Tensor>& douts_;
};

// Calls body(store) with store(dst, v) assigning (dst = v) when `assign` and adding (dst += v)
// otherwise: a backward writes its loop once, for a Grads::Buffer, and the loop is compiled for
// each case without a branch inside.
template <class Body>
void assign_or_add(bool assign, Body&& body) {
  if (assign) {
    body([](auto& dst, auto v) { dst = v; });
  } else {
    body([](auto& dst, auto v) { dst += v; });
  }
}

// Receives the gradient of the op's output (contiguous, the output's shape and dtype); for an
// op with several outputs, output 0's, undefined when only another received one (Grads::dout).
using BackwardFn = std::function<void(const Tensor& dout, Grads& dinputs)>;

// A composite op's outputs recomputed from primitives, its inputs joined with Grads::input.
using ReferenceFn = std::function<std::vector<Tensor>(Grads& inputs)>;

// How an entry's gradients are computed: a primitive's backward in differentiable ops (first
// order with recording off, higher orders with it on), or a composite's reference, recomputed
// from primitives and differentiated by the walk. The fast room may add a kernel for the same
// first-order gradient (Grads::write), tested equal to it and never run under create_graph or
// a ReferenceModeGuard. allow_inf exempts an intended infinity in the output from anomaly
// detection (masked_fill).
struct Derivative {
  BackwardFn backward = nullptr;
  BackwardFn fast = nullptr;
  ReferenceFn reference = nullptr;
  bool allow_inf = false;
};

// The storage version (Storage::version) of one input when its op was recorded. A weak
// reference: it keeps no buffer alive, and an input nobody saved may be freed.
struct InputVersion {
  std::weak_ptr<Storage> storage;
  uint64_t version;
};

// A buffer an entry keeps for its backward, as the tape's drawing shows it
// (tapegrad/viz/tape_drawing.h).
struct SavedBuffer {
  std::string name;  // "x", "rstd", "mask": what the backward calls it
  Shape shape;
  DType dtype = DType::Float32;
  SavedBuffer(std::string name, Shape shape, DType dtype)
      : name(std::move(name)), shape(std::move(shape)), dtype(dtype) {}
  SavedBuffer(std::string name, const Tensor& t)
      : SavedBuffer(std::move(name), t.shape(), t.dtype()) {}
};

struct TapeEntry {
  const char* op;
  uint64_t seq;                                   // position in execution order
  const void* tape;                               // the recording thread's tape
  std::vector<std::shared_ptr<GradNode>> inputs;  // null for inputs that need no grad
  std::vector<InputVersion> versions;             // one per defined input
  // Each output's node owns this entry; an entry with several outputs may outlive one of them.
  std::vector<std::weak_ptr<GradNode>> outputs;
  Derivative derivative;
  bool released = false;
  Precision precision = Precision::Float32;  // autocast's when recorded; backward runs in it
  std::string module;  // while profiling: the module path that recorded it (profile.h)
  // Kept only in details mode (TapeDetailsGuard, or anomaly mode): every input's shape (for the
  // anomaly messages and the drawing) and what the entry saved (note_saved).
  std::vector<Shape> input_shapes;
  std::vector<SavedBuffer> saved;

  TapeEntry() = default;
  TapeEntry(const TapeEntry&) = delete;
  TapeEntry& operator=(const TapeEntry&) = delete;
  // A chain of a million ops is freed in a loop, not by a million nested destructor calls.
  ~TapeEntry();
};

namespace detail {
// The per-thread modes the guards below set.
bool& grad_mode();
bool& anomaly_mode();
bool& details_mode();
bool& reference_mode();
Precision& autocast_mode();
}  // namespace detail

// Sets a per-thread mode (kMode() names it) for its scope, to kValue or the value given, and
// restores the previous value on exit.
template <auto kMode, auto kValue>
class ScopedMode {
 public:
  using Value = decltype(kValue);
  explicit ScopedMode(Value value = kValue) : previous_(kMode()) { kMode() = value; }
  ~ScopedMode() { kMode() = previous_; }
  ScopedMode(const ScopedMode&) = delete;
  ScopedMode& operator=(const ScopedMode&) = delete;

 private:
  Value previous_;
};

// Grad mode: NoGradGuard turns recording off for its scope (inference, optimizer updates);
// EnableGradGuard, like torch.enable_grad, turns it on inside a NoGradGuard.
bool grad_enabled();
using NoGradGuard = ScopedMode<detail::grad_mode, false>;
using EnableGradGuard = ScopedMode<detail::grad_mode, true>;

// Anomaly detection, like torch.autograd.detect_anomaly: while a DetectAnomalyGuard lives, the
// first NaN or Inf an op's output or a backward's gradient holds throws an Error naming the op,
// its input shapes and, for a gradient, the input and the op that made it. An Inf counts only
// from finite inputs (a -inf mask flowing through softmax is no anomaly).
bool anomaly_enabled();
using DetectAnomalyGuard = ScopedMode<detail::anomaly_mode, true>;

// Details mode: while a TapeDetailsGuard (or a DetectAnomalyGuard) lives, each entry also keeps
// its inputs' shapes and what it saved, which the tape's drawing shows (viz/tape_drawing.h).
bool tape_details();
using TapeDetailsGuard = ScopedMode<detail::details_mode, true>;

// Reference mode: while a ReferenceModeGuard lives, fast_ops() is null: composites run as their
// references and no fast kernel runs. What the fast room is tested equal to.
bool reference_mode();
using ReferenceModeGuard = ScopedMode<detail::reference_mode, true>;

// Autocast, like PyTorch's torch.autocast("cpu", dtype=torch.bfloat16): while an AutocastGuard
// lives, the matrix products of float32 ops (matmul, and so linear and attention) take their
// operands rounded to bfloat16 (bfloat16.h) and sum in float32; everything else (softmax,
// layer norm, losses, sums, the parameters, the optimizer) stays float32. An entry keeps the
// precision it was recorded in, and its backward runs in that precision, inside the guard or
// not: the gradient's products are bfloat16 products too.
using AutocastGuard = ScopedMode<detail::autocast_mode, Precision::BFloat16>;

// The precision a matrix product of `dtype` operands runs in here: the autocast's for float32,
// float64 always in full (gradcheck's products stay exact).
Precision product_precision(DType dtype);

// True when an op on these inputs must be recorded: grad mode is on and one requires grad.
template <class... Ts>
bool recording(const Ts&... inputs) {
  return grad_enabled() && (inputs.requires_grad() || ...);
}
bool recording(const std::vector<Tensor>& inputs);

// A tensor an op's backward keeps, by the name the backward gives it: what the drawing shows
// (tapegrad/viz/tape_drawing.h). record() reads it only in details mode; an undefined tensor
// is left out.
struct Saved {
  const char* name;
  const Tensor& tensor;
};

// Appends an entry for `op` and makes `out` its non-leaf output, `saved` naming the tensors its
// derivative keeps. Call only when recording(...) is true. Throws if an input belongs to a
// graph that an earlier backward() already released.
void record(const char* op, const std::vector<Tensor>& inputs, Tensor& out, Derivative derivative,
            std::initializer_list<Saved> saved = {});
// The same for an op with several outputs (add_and_layer_norm's normalised sum and the sum
// itself): one entry, whose backward runs once, after every op that read any of them.
void record(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor*>& outs,
            Derivative derivative, std::initializer_list<Saved> saved = {});

// Adds fn to node's hooks (what Tensor::register_hook does for a tensor's node).
HookHandle register_hook(const std::shared_ptr<GradNode>& node, GradHook fn);

// Describes what the entry that made `out` saved for its backward, for the drawing, where that
// is not a tensor record() can name (an index vector, a buffer inside a fused kernel's
// closure). An op calls it right after record(), under `if (tape_details())`.
void note_saved(const Tensor& out, std::vector<SavedBuffer> saved);

// Runs the reverse pass from `root` (see Tensor::backward). Throws when the graph was recorded
// on another thread (each thread has its own tape), when an input of an op was written in
// place after the op recorded it, or when an earlier backward released the graph.
void backward(const Tensor& root, const Tensor& dout, BackwardOptions options = {});

struct GradOptions {
  bool retain_graph = false;  // keep the graph for another backward (default: create_graph)
  bool create_graph = false;  // record the backward, so the gradients are differentiable
  bool allow_unused = false;  // an input the outputs do not depend on gets an undefined tensor
};

// The gradients of sum_k <outputs[k], grad_outputs[k]> with respect to each input, returned
// in the inputs' order; no tensor's .grad() changes. grad_outputs may be empty when every
// output has one element (the seed is 1). Only the part of the graph between the outputs and
// the inputs runs. An input the outputs do not depend on is an error unless allow_unused.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, GradOptions options = {});

// Live (not yet released) entries on this thread's tape.
size_t tape_size();

}  // namespace tapegrad
