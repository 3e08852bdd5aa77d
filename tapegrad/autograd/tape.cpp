// The tape: recording an op, the reverse walk of backward() with its checks (the graph's
// thread, inputs written in place since), the ways a backward writes a gradient (Grads), grad
// and anomaly modes, and freeing a graph in a loop.
#include "tapegrad/autograd/tape.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

#include "tapegrad/autograd/strided.h"

namespace tapegrad {

namespace {

struct Tape {
  std::vector<std::weak_ptr<TapeEntry>> entries;  // execution order
  uint64_t next_seq = 0;
  size_t compact_at = 1024;  // compact when entries reach this size

  // Drops references to entries that were released or whose graph was freed.
  void compact() {
    std::erase_if(entries, [](const std::weak_ptr<TapeEntry>& w) {
      auto e = w.lock();
      return !e || e->released;
    });
    compact_at = std::max<size_t>(1024, 2 * entries.size());
  }
};

thread_local Tape t_tape;
thread_local bool t_grad_enabled = true;
thread_local bool t_anomaly = false;

enum class Finite { Yes, HasNaN, HasInf };

Finite finiteness(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return Finite::Yes;
  const Tensor c = t.contiguous();
  return dispatch_floating("anomaly", c.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = c.data<T>();
    Finite f = Finite::Yes;
    for (int64_t i = 0, n = c.numel(); i < n; ++i) {
      if (std::isnan(p[i])) return Finite::HasNaN;
      if (std::isinf(p[i])) f = Finite::HasInf;
    }
    return f;
  });
}

std::string shapes_of(const std::vector<Shape>& shapes) {
  std::vector<std::string> parts;
  for (const Shape& s : shapes) parts.push_back(fmt::format("{}", s));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// grad += g, g of the node's shape and float dtype, in any layout.
void accumulate(GradNode& node, const Tensor& g) {
  if (!node.grad.defined()) {
    node.grad = g.clone();
    return;
  }
  dispatch_floating("backward", node.dtype, [&](auto tag) {
    using T = decltype(tag);
    copy_strided(node.grad.data<T>(), node.grad.strides(), g.data<T>(), g.strides(), g.shape(),
                 true);
  });
}

}  // namespace

// Freeing a graph frees each entry's inputs and saved tensors, which may be the last owners
// of the entries before it. Done by nested destructors that would be one call per op in a
// chain, enough to overflow the stack. Instead a dying entry hands what it owns to this
// thread's queue, and only the outermost destructor empties the queue, in a loop; anything
// freed meanwhile joins the queue rather than recursing.
TapeEntry::~TapeEntry() {
  struct Owned {
    std::vector<std::shared_ptr<GradNode>> inputs;
    BackwardFn backward;
  };
  thread_local std::vector<Owned> queue;
  thread_local bool draining = false;
  if (inputs.empty() && !backward) return;
  queue.push_back({std::move(inputs), std::move(backward)});
  if (draining) return;
  draining = true;
  while (!queue.empty()) {
    Owned next = std::move(queue.back());
    queue.pop_back();
  }  // `next` is freed here, possibly queueing more
  draining = false;
}

bool anomaly_enabled() { return t_anomaly; }
DetectAnomalyGuard::DetectAnomalyGuard() : previous_(t_anomaly) { t_anomaly = true; }
DetectAnomalyGuard::~DetectAnomalyGuard() { t_anomaly = previous_; }

bool grad_enabled() { return t_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

bool recording(const std::vector<Tensor>& inputs) {
  return grad_enabled() && std::any_of(inputs.begin(), inputs.end(),
                                       [](const Tensor& t) { return t.requires_grad(); });
}

Tensor& Grads::operator[](size_t i) {
  GradNode& node = *inputs_[i];
  if (!node.grad.defined()) node.grad = zeros(node.shape, node.dtype);
  return node.grad;
}

Grads::Buffer Grads::dense(size_t i) {
  GradNode& node = *inputs_[i];
  const bool first = !node.grad.defined();
  if (first) node.grad = empty(node.shape, node.dtype);
  return {node.grad, first};
}

void Grads::pass(size_t i, const Tensor& g) {
  GradNode& node = *inputs_[i];
  TG_CHECK(g.shape() == node.shape && g.dtype() == node.dtype && g.is_contiguous(),
           "backward: a gradient of shape {} and dtype {} was passed to an input of shape {} "
           "and dtype {}",
           g.shape(), g.dtype(), node.shape, node.dtype);
  if (node.grad.defined()) {
    accumulate(node, g);
  } else {
    node.grad = g;
  }
}

void record(const char* op, const std::vector<Tensor>& inputs, Tensor& out, BackwardFn backward,
            bool allow_inf) {
  auto entry = std::make_shared<TapeEntry>();
  if (t_anomaly) [[unlikely]] {
    for (const Tensor& in : inputs)
      entry->input_shapes.push_back(in.defined() ? in.shape() : Shape{});
    const Finite f = finiteness(out);
    TG_CHECK(f != Finite::HasNaN, "anomaly: forward of op '{}' (inputs {}) produced NaN", op,
             shapes_of(entry->input_shapes));
    // inputs are scanned only when the output holds an Inf
    TG_CHECK(f != Finite::HasInf || allow_inf ||
                 std::any_of(inputs.begin(), inputs.end(),
                             [](const Tensor& in) { return finiteness(in) != Finite::Yes; }),
             "anomaly: forward of op '{}' (inputs {}) produced Inf from finite inputs", op,
             shapes_of(entry->input_shapes));
  }
  entry->op = op;
  entry->seq = t_tape.next_seq++;
  entry->tape = &t_tape;
  entry->inputs.reserve(inputs.size());
  entry->versions.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    if (in.defined()) entry->versions.push_back({in.impl().storage, in.impl().storage->version()});
    std::shared_ptr<GradNode> node = in.defined() ? in.impl().node : nullptr;
    if (node && node->grad_fn) {
      TG_CHECK(!node->grad_fn->released,
               "{}: an input comes from op '{}', whose graph an earlier backward() already "
               "released; recompute it or detach() it",
               op, node->grad_fn->op);
    }
    entry->inputs.push_back(std::move(node));
  }
  entry->backward = std::move(backward);

  auto node = std::make_shared<GradNode>();
  node->shape = out.shape();
  node->dtype = out.dtype();
  node->grad_fn = entry;
  entry->output = node.get();
  out.impl().node = std::move(node);

  if (t_tape.entries.size() >= t_tape.compact_at) t_tape.compact();
  t_tape.entries.push_back(entry);
}

void backward(const Tensor& root, const Tensor& dout) {
  TG_CHECK(root.requires_grad(),
           "backward: the tensor does not require grad (no input of its graph requires grad, "
           "or it was computed under a NoGradGuard)");
  Tensor seed = dout;
  if (!seed.defined()) {
    TG_CHECK(root.numel() == 1,
             "backward: an implicit gradient needs a one-element tensor, got shape {}; pass dout",
             root.shape());
    seed = ones(root.shape(), root.dtype());
  }
  TG_CHECK(seed.shape() == root.shape() && seed.dtype() == root.dtype(),
           "backward: dout has shape {} and dtype {}, the tensor has shape {} and dtype {}",
           seed.shape(), seed.dtype(), root.shape(), root.dtype());
  NoGradGuard no_grad;  // backward functions run ops that must not be recorded

  GradNode& root_node = *root.impl().node;
  if (!root_node.grad_fn) {  // a leaf: its gradient is the seed
    accumulate(root_node, seed);
    return;
  }
  TG_CHECK(root_node.grad_fn->tape == &t_tape,
           "backward: the graph of this tensor (from op '{}') was recorded on another thread; "
           "call backward() on the thread that ran its forward",
           root_node.grad_fn->op);
  TG_CHECK(!root_node.grad_fn->released,
           "backward: the graph of this tensor (from op '{}') was already released by an "
           "earlier backward()",
           root_node.grad_fn->op);
  accumulate(root_node, seed);

  const uint64_t root_seq = root_node.grad_fn->seq;
  auto& entries = t_tape.entries;
  // Processed entries give up their input nodes only after the walk: an intermediate tensor
  // the caller already dropped lives on in its node, which still has to receive its gradient.
  std::vector<std::shared_ptr<GradNode>> keep_alive;
  for (size_t i = entries.size(); i-- > 0;) {
    std::shared_ptr<TapeEntry> e = entries[i].lock();
    if (!e || e->seq > root_seq || !e->output->grad.defined()) continue;
    TG_CHECK(!e->released,
             "backward: op '{}' of this graph was already released by an earlier backward()",
             e->op);
    for (size_t k = 0; k < e->versions.size(); ++k) {
      const auto storage = e->versions[k].storage.lock();
      TG_CHECK(!storage || storage->version() == e->versions[k].version,
               "backward: an input of op '{}' (input {} of {}) was modified in place after the op "
               "recorded it (version {} -> {}); its gradient would be wrong. Write to a copy, or "
               "recompute the op after the write",
               e->op, k, e->versions.size(), e->versions[k].version, storage->version());
    }
    Grads grads(e->inputs);
    e->backward(e->output->grad, grads);
    if (t_anomaly && !e->input_shapes.empty()) [[unlikely]] {
      for (size_t k = 0; k < e->inputs.size(); ++k) {
        if (!e->inputs[k]) continue;
        const Finite f = finiteness(e->inputs[k]->grad);
        const auto& producer = e->inputs[k]->grad_fn;
        TG_CHECK(f == Finite::Yes,
                 "anomaly: backward of op '{}' (inputs {}) produced {} in the gradient of input "
                 "{} {}, which came from {}",
                 e->op, shapes_of(e->input_shapes), f == Finite::HasNaN ? "NaN" : "Inf", k,
                 e->inputs[k]->shape,
                 producer ? fmt::format("op '{}'", producer->op) : std::string("a leaf"));
      }
    }
    // Release: the output's gradient has been passed on, the saved buffers are not needed.
    e->output->grad = Tensor();
    e->backward = nullptr;
    std::move(e->inputs.begin(), e->inputs.end(), std::back_inserter(keep_alive));
    e->inputs.clear();
    e->versions.clear();
    e->released = true;
  }
  t_tape.compact();
}

size_t tape_size() {
  return static_cast<size_t>(std::count_if(t_tape.entries.begin(), t_tape.entries.end(),
                                           [](const std::weak_ptr<TapeEntry>& w) {
                                             auto e = w.lock();
                                             return e && !e->released;
                                           }));
}

}  // namespace tapegrad
