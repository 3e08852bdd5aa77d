// The tape, drawn: the graph behind some tensors as a picture a browser opens (SVG, our own
// writer) and as Graphviz DOT. It shows what the engine keeps: each recorded op in recording
// order with its inputs' and output's shapes, which tensors are leaves and require grad, what
// each entry saved for its backward and how many bytes; after a backward, every tensor's
// gradient norm.
//
//   TapeDetailsGuard details;   // entries keep their inputs' shapes and saved buffers
//   Tensor loss = sum(tanh(matmul(x, w) + b));
//   viz::TapeDrawing drawing({{"loss", loss}, {"w", w}, {"b", b}});
//   loss.backward();            // the drawing's hooks note each gradient's norm
//   write_file("tape.svg", drawing.svg());   // or drawing.dot() for `dot -Tsvg`
//
// Without a TapeDetailsGuard during the forward, the drawing still has every op and every
// tensor that requires grad, but not the inputs that do not nor what was saved.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/tape.h"

namespace tapegrad::viz {

class TapeDrawing {
 public:
  // A tensor of the graph: one that requires grad (an op's output, or a leaf), or an input that
  // does not (a constant, known only in details mode).
  struct Value {
    std::string label;  // the name given, else "t<n>" (or "const" for a constant)
    Shape shape;
    DType dtype = DType::Float32;
    bool leaf = false;           // made by no op
    bool requires_grad = false;  // false only for constants
  };
  // One tape entry.
  struct Step {
    std::string op;
    uint64_t seq = 0;                // its position on the tape (the drawing numbers steps from 0)
    std::vector<int> inputs;         // indices into values(), in the op's order
    std::vector<int> outputs;        // one for most ops (add_layer_norm with its sum: two)
    std::vector<SavedBuffer> saved;  // empty outside details mode, or when nothing is saved
  };

  // Captures the graph behind the named tensors now: every entry on a path to one of them, and
  // every tensor those entries read or wrote. Names label tensors (the outputs, parameters);
  // capture before backward(), which releases the entries. Hooks on each tensor that requires
  // grad note its gradient's norm when a later backward reaches it.
  explicit TapeDrawing(const std::vector<std::pair<std::string, Tensor>>& named);
  ~TapeDrawing();  // removes the hooks
  TapeDrawing(const TapeDrawing&) = delete;
  TapeDrawing& operator=(const TapeDrawing&) = delete;

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Step>& steps() const { return steps_; }
  // The L2 norm of value i's gradient in the last backward that reached it; none before.
  std::optional<double> grad_norm(size_t value) const;
  // Bytes the steps saved for backward, in all.
  size_t saved_bytes() const;

  // The tape as a list down the page: each op's inputs (leaves where first used) and its
  // output below it, arrows from every tensor to the ops that read it; saved buffers beside
  // each op, gradient norms beside each tensor.
  std::string svg() const;
  // The same graph for Graphviz: ops as boxes, tensors as ellipses.
  std::string dot() const;

 private:
  std::vector<Value> values_;
  std::vector<Step> steps_;
  std::shared_ptr<std::vector<std::optional<double>>> norms_;
  std::vector<HookHandle> hooks_;
};

}  // namespace tapegrad::viz
