// The tape: reverse-mode autograd as a flat list of op records in execution order.
//
// Each differentiable op, when any input requires grad and grad mode is on, calls record():
// it appends one TapeEntry (op name, input nodes, how to differentiate it) to this thread's
// tape and makes its output a non-leaf whose GradNode owns that entry (an op may have several
// outputs, each owning the one entry). backward() walks the tape in reverse from the root's
// entry: an entry whose output received a gradient computes its inputs' gradients, which
// accumulate into theirs; then the entry is released, freeing every buffer it saved. No
// recursion, so depth is not a limit.
//
// One derivative per op. A primitive op states its gradient
// once, as a backward written in differentiable ops (da = dout @ b^T). backward() runs it with
// recording off; with create_graph it runs it with recording on, so the gradients it produces
// are on the tape themselves and can be differentiated again (a Hessian-vector product, a
// gradient penalty), to any order. A composite op (layer norm, attention, linear with its
// epilogue, cross-entropy) states no derivative at all: it names its reference, the op
// recomputed from primitives, and the walk differentiates that. A fast kernel may compute
// either's first-order gradient faster; it is an implementation of the same derivative, tested
// equal to it (tests/autograd/test_registry.cpp), and a ReferenceModeGuard turns every fast
// kernel off. retain_graph keeps the entries for another backward; grad() returns gradients
// instead of accumulating them into .grad(); hooks see (and may replace) a tensor's gradient
// once it is complete.
//
// Ownership runs backwards like the graph: an output's node owns its entry, the entry owns its
// input nodes. The tape itself only holds weak references for ordering, so a graph that is
// dropped without backward() (say, an evaluation pass that forgot its NoGradGuard) frees
// itself when its last tensor goes away.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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

// What a backward promises about the elements of input i's gradient it writes.
//   Every: each element exactly once (an elementwise op, a gemm's output). The first writer
//          gets the buffer uninitialised and assigns, which saves zero-filling it and reading
//          the zeros back.
//   Some:  a scatter or a sum (embedding rows, a broadcast operand, a slice's window): the
//          buffer is zero-filled for the first writer, and every writer adds (first = false).
enum class Writes { Every, Some };

// The gradients a backward function writes, one per op input.
//
// Writing a gradient: the one rule. A backward delivers input i's gradient in one of two
// forms, and both obey the same rule: within one walk, the first gradient delivered to a tensor
// becomes that tensor's gradient buffer, and every later one is added into it.
//   pass(i, t)          hands on a computed tensor t: the first delivery adopts t itself (no
//                       copy; a view passes dout on this way), a later one adds t in.
//   write(i, writes)    returns the buffer to write into and whether this backward is its first
//                       writer: assign when first, add otherwise (assign_or_add writes the loop
//                       once for both).
// A buffer (its whole storage) belongs to one gradient at a time. A buffer handed on that
// another gradient already holds (dout to both operands of an add) is copied for the second,
// so that a += into one never changes the other.
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

// How an entry's gradients are computed. An op gives a backward or a reference, and may add a
// fast kernel:
//   backward   the derivative in differentiable ops, delivered with Grads::pass: first order
//              with recording off, higher orders with it on
//   fast       the same first-order gradient written into buffers (Grads::write); used unless
//              create_graph, a ReferenceModeGuard or the learner's edition (fast_ops.h)
//   reference  a composite op recomputed from primitives; the walk differentiates it (the op
//              then has no backward of its own)
// allow_inf exempts an intended infinity in the output from anomaly detection (masked_fill).
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
}  // namespace detail

// Sets a per-thread mode for its scope and restores the previous value on exit.
template <bool& (*kMode)(), bool kValue>
class ScopedMode {
 public:
  ScopedMode() : previous_(kMode()) { kMode() = kValue; }
  ~ScopedMode() { kMode() = previous_; }
  ScopedMode(const ScopedMode&) = delete;
  ScopedMode& operator=(const ScopedMode&) = delete;

 private:
  bool previous_;
};

// Grad mode. NoGradGuard turns recording off for its scope (inference, optimizer updates,
// weight initialisation); EnableGradGuard, like torch.enable_grad, turns it on even inside a
// NoGradGuard (gradgradcheck's finite differences evaluate a first-order gradient, which must
// record).
bool grad_enabled();
using NoGradGuard = ScopedMode<detail::grad_mode, false>;
using EnableGradGuard = ScopedMode<detail::grad_mode, true>;

// Anomaly detection, like torch.autograd.detect_anomaly. While a DetectAnomalyGuard lives on
// this thread, every recorded op checks its output and every backward step checks the
// gradients it produced; the first NaN or Inf throws an Error naming the op and its input
// shapes (for a gradient, also which input and the op that produced that input). An Inf in a
// forward output counts only when no input held one, so -inf masks flowing through a softmax
// are not anomalies, and masked_fill with an infinite value is exempt. Off by default; when
// off it costs one thread-local check per op.
bool anomaly_enabled();
using DetectAnomalyGuard = ScopedMode<detail::anomaly_mode, true>;

// Details mode: while a TapeDetailsGuard lives (or a DetectAnomalyGuard), each recorded entry
// also keeps its inputs' shapes and what it saved for its backward, which the tape's drawing
// shows (tapegrad/viz/tape_drawing.h). Off by default; off, it costs one thread-local check
// per op.
bool tape_details();
using TapeDetailsGuard = ScopedMode<detail::details_mode, true>;

// Reference mode: while a ReferenceModeGuard lives, composite ops run as their references
// (recording primitives) and every gradient comes from an op's backward or reference, never
// from a fast kernel: what the fast kernels are tested equal to.
bool reference_mode();
using ReferenceModeGuard = ScopedMode<detail::reference_mode, true>;

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
