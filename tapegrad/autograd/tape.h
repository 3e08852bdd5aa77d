// The tape: reverse-mode autograd as a flat list of op records in execution order (the book,
// docs/tape.md). A differentiable op on an input that requires grad calls record(), which
// appends one TapeEntry and makes the op's output a non-leaf whose GradNode owns the entry.
// backward() walks the tape in reverse: an entry whose outputs received gradients computes its
// inputs' (Grads), then is released with every buffer it saved. Each op states its derivative
// once (Derivative; docs/gradients.md). Ownership runs backwards like the graph (an output's
// node owns its entry, the entry its input nodes; the tape holds weak references), so a graph
// dropped without backward() frees itself. Around this core, each in a file of its own: the
// modes (modes.h), hooks (hooks.h), anomaly checks (anomaly.h), grad() (grad.h) and the fast
// kernels' way of writing a gradient (fast_kernel.h). record() is tape.cpp, the walk walk.cpp,
// Grads grads.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/bfloat16.h"
#include "tapegrad/autograd/modes.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad {

struct TapeEntry;
struct Walk;
enum class Writes;  // fast_kernel.h
struct GradBuffer;  // fast_kernel.h

// The one op the walk records itself: under create_graph, the sum of two gradients of a tensor
// (defined with the elementwise ops, ops/elementwise.h).
Tensor add(const Tensor& a, const Tensor& b);

// The gradients a backward delivers, one per op input, under one rule (docs/gradients.md):
// within one walk, the first gradient delivered to a tensor becomes its gradient buffer, and
// every later one is added into it. pass(i, t) hands on a tensor.
class Grads {
 public:
  Grads(TapeEntry& entry, Walk& walk, const std::vector<Tensor>& douts);
  // Whether input i requires grad; skip computing what nobody asked for.
  bool wants(size_t i) const;

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

  // For a fast kernel (Derivative::fast): input i's buffer to write into (fast_kernel.h).
  GradBuffer write(size_t i, Writes writes);

 private:
  // Input i's node, null where it needs no grad (node() refuses that one). Each call names
  // itself in the error a wrong index gets: "backward of 'my_op': write(2), but the op has 2
  // input(s)".
  const std::shared_ptr<GradNode>& input_node(size_t i, const char* call) const;
  GradNode& node(size_t i, const char* call) const;
  TapeEntry& entry_;
  Walk& walk_;
  const std::vector<Tensor>& douts_;
};

// Receives the gradient of the op's output (contiguous, the output's shape and dtype); for an
// op with several outputs, output 0's, undefined when only another received one (Grads::dout).
using BackwardFn = std::function<void(const Tensor& dout, Grads& dinputs)>;

// A composite op's outputs recomputed from primitives, its inputs joined with Grads::input.
using ReferenceFn = std::function<std::vector<Tensor>(Grads& inputs)>;

// How an entry's gradients are computed: a primitive's backward in differentiable ops (first
// order with recording off, higher orders with it on), or a composite's reference, recomputed
// from primitives and differentiated by the walk. allow_inf exempts an intended infinity in the
// output from anomaly detection (masked_fill).
struct Derivative {
  BackwardFn backward = nullptr;
  BackwardFn fast = nullptr;  // a faster kernel for the same first-order gradient (fast_kernel.h)
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
// derivative keeps; returns out. Call only when recording(...) is true. Throws if an input
// belongs to a graph that an earlier backward() already released.
Tensor record(const char* op, const std::vector<Tensor>& inputs, Tensor& out, Derivative derivative,
              std::initializer_list<Saved> saved = {});
// The same for an op with several outputs (add_and_layer_norm's normalised sum and the sum
// itself): one entry, whose backward runs once, after every op that read any of them.
void record(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor*>& outs,
            Derivative derivative, std::initializer_list<Saved> saved = {});

// Describes what the entry that made `out` saved for its backward, for the drawing, where that
// is not a tensor record() can name (an index vector, a buffer inside a fused kernel's
// closure). An op calls it right after record(), under `if (tape_details())`.
void note_saved(const Tensor& out, std::vector<SavedBuffer> saved);

// Runs the reverse pass from `root` (see Tensor::backward). Throws when the graph was recorded
// on another thread (each thread has its own tape), when an input of an op was written in
// place after the op recorded it, or when an earlier backward released the graph.
void backward(const Tensor& root, const Tensor& dout, BackwardOptions options = {});

namespace detail {
// The tape itself, one a thread (this_thread_tape): its entries in execution order, each held
// weakly (an entry is owned by its outputs' nodes), and the walks running on it. record()
// appends; while no walk indexes the tape, it drops the entries no longer live (compact).
struct Tape {
  std::vector<std::weak_ptr<TapeEntry>> entries;
  uint64_t next_seq = 0;
  int walks = 0;
  size_t compact_at = 1024;  // compact when entries reach this size
  void compact();
};
Tape& this_thread_tape();

// The reverse walk behind backward() and grad(): from `roots`, seeded with `seeds` (an undefined
// seed is 1 for a one-element root). accumulate delivers into .grad(); given `targets`, only
// the entries on a path from a target to the roots run, and the targets' gradients are
// returned (undefined for a target the roots do not depend on).
struct WalkOptions {
  bool create_graph = false;
  bool retain_graph = false;
  bool accumulate = true;
  std::vector<const GradNode*> targets = {};
};
std::vector<Tensor> reverse_pass(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds,
                                 const WalkOptions& options);
// The walk's two doors for Grads (grads.cpp): whether it records the backward (create_graph),
// and node's gradient += g under the tape's one rule.
bool creates_graph(const Walk& walk);
void deliver(Walk& walk, const std::shared_ptr<GradNode>& node, const Tensor& g);
}  // namespace detail

// Live (not yet released) entries on this thread's tape.
size_t tape_size();

}  // namespace tapegrad
