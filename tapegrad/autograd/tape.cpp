// The tape: recording an op, the reverse walk of backward() with its checks (the graph's
// thread, inputs written in place since), the ways a backward writes a gradient (Grads), grad
// and anomaly modes, and freeing a graph in a loop.
#include "tapegrad/autograd/tape.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iterator>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/strided.h"
#include "tapegrad/profile/profile.h"

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
thread_local bool t_details = false;
thread_local bool t_reference = false;
thread_local Precision t_autocast = Precision::Float32;

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
  return fmt::format("{}", fmt::join(shapes, ", "));
}

// Recording on for a backward that creates a graph, whatever the caller's mode; off otherwise.
using GradModeScope = ScopedMode<detail::grad_mode, true>;

// dst += g, in place; dst's shape and dtype, either in any layout.
void add_in_place(Tensor& dst, const Tensor& g) {
  dispatch_floating("backward", dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    copy_strided(dst.data<T>(), dst.strides(), g.data<T>(), g.strides(), g.shape(), true);
  });
}

thread_local int t_walks = 0;  // walks running on this thread: the tape is not compacted then

// What record() is given by an op, a user's included: new tensors as outputs, and a backward.
void check_record(const char* op, const std::vector<Tensor*>& outs, const Derivative& d) {
  TG_CHECK(!outs.empty(), "{}: an op records at least one output", op);
  TG_CHECK(d.backward || d.reference,
           "{}: record() needs a backward function (or, for a composite op, a reference)", op);
  for (size_t k = 0; k < outs.size(); ++k) {
    TG_CHECK(outs[k] != nullptr && outs[k]->defined(), "{}: output {} is not a tensor", op, k);
    TG_CHECK(!outs[k]->impl().node,
             "{}: output {} already belongs to a graph (an input, or another op's output); an op "
             "records a new tensor",
             op, k);
  }
}

}  // namespace

// One reverse walk: how it runs and what it leaves behind.
struct Walk {
  bool create_graph = false;
  bool accumulate = true;  // deliver into .grad(); false for grad(), which touches none
  std::vector<std::shared_ptr<GradNode>> leaves;  // leaves that received a gradient
  std::vector<const GradNode*> targets;           // grad()'s inputs
  std::vector<Tensor> captured;                   // and their gradients

  // Buffers that are some tensor's pending gradient in this walk. Only a walk that adds in
  // place needs them: a create_graph walk never writes a buffer.
  std::unordered_set<const Storage*> held;

  // Makes g node's gradient buffer, or a copy of g when another gradient holds g's buffer
  // already (dout handed to both operands of an add): the next += into one must not change the
  // other.
  void hold(GradNode& node, const Tensor& g) {
    if (!create_graph && !held.insert(g.impl().storage.get()).second) {
      node.pending = g.clone();
      held.insert(node.pending.impl().storage.get());
      return;
    }
    node.pending = g;
  }
  // node's gradient is handed on (complete): its buffer is free for one new holder.
  void release(GradNode& node) {
    if (!create_graph && node.pending.defined()) held.erase(node.pending.impl().storage.get());
    node.pending = Tensor();
  }

  // node.pending += g: the first gradient is adopted, later ones added (in place, or recorded
  // when the walk creates a graph).
  void add(const std::shared_ptr<GradNode>& node, const Tensor& g) {
    TG_CHECK(!node->grad_fn || !node->grad_fn->released,  // off the tape: it would be lost
             "backward: op '{}' of this graph was already released by an earlier backward(); "
             "pass retain_graph to that one to walk the graph twice",
             node->grad_fn->op);
    if (!node->pending.defined()) {
      if (!node->grad_fn) leaves.push_back(node);
      hold(*node, g);
    } else if (create_graph) {
      node->pending = tapegrad::add(node->pending, g);
    } else {
      add_in_place(node->pending, g);
    }
  }

  // node's gradient in this walk is complete: its hooks run, grad() captures it, .grad()
  // receives it (a leaf, or a non-leaf that retains its gradient). Returns what flows on.
  Tensor complete(GradNode& node) {
    Tensor g = node.pending;
    const auto hooks = node.hooks;  // a hook may remove itself
    for (const auto& [id, hook] : hooks) {
      Tensor r = hook(g);
      if (!r.defined()) continue;
      TG_CHECK(r.shape() == node.shape && r.dtype() == node.dtype,
               "backward: a hook returned a gradient of shape {} and dtype {} for a tensor of "
               "shape {} and dtype {}",
               r.shape(), r.dtype(), node.shape, node.dtype);
      g = create_graph ? r : r.clone();  // the walk adds into its buffers; not into the hook's
    }
    // A non-leaf's gradient flows on into buffers the walk adds into: what is kept is a copy.
    const auto kept = [&] { return node.grad_fn && !create_graph ? g.clone() : g; };
    for (size_t i = 0; i < targets.size(); ++i) {
      if (targets[i] == &node) captured[i] = kept();
    }
    if (accumulate && (!node.grad_fn || node.retains_grad)) {
      if (!node.grad.defined()) {
        node.grad = kept();
      } else if (create_graph || node.grad.requires_grad()) {
        node.grad = tapegrad::add(node.grad, g);
      } else {
        add_in_place(node.grad, g);
      }
    }
    return g;
  }
};

// Freeing a graph frees each entry's inputs and saved tensors, which may be the last owners
// of the entries before it. Done by nested destructors that would be one call per op in a
// chain, enough to overflow the stack. Instead a dying entry hands what it owns to this
// thread's queue, and only the outermost destructor empties the queue, in a loop; anything
// freed meanwhile joins the queue rather than recursing.
TapeEntry::~TapeEntry() {
  struct Owned {
    std::vector<std::shared_ptr<GradNode>> inputs;
    Derivative derivative;
  };
  thread_local std::vector<Owned> queue;
  thread_local bool draining = false;
  const Derivative& d = derivative;
  if (inputs.empty() && !d.backward && !d.reference && !d.fast) return;
  queue.push_back({std::move(inputs), std::move(derivative)});
  if (draining) return;
  draining = true;
  while (!queue.empty()) {
    Owned next = std::move(queue.back());
    queue.pop_back();
  }  // `next` is freed here, possibly queueing more
  draining = false;
}

bool& detail::grad_mode() { return t_grad_enabled; }
bool& detail::anomaly_mode() { return t_anomaly; }
bool& detail::details_mode() { return t_details; }
bool& detail::reference_mode() { return t_reference; }
Precision& detail::autocast_mode() { return t_autocast; }
bool grad_enabled() { return t_grad_enabled; }
bool anomaly_enabled() { return t_anomaly; }
bool tape_details() { return t_details || t_anomaly; }
bool reference_mode() { return t_reference; }
Precision product_precision(DType dtype) {
  return dtype == DType::Float32 ? t_autocast : Precision::Float32;
}

bool recording(const std::vector<Tensor>& inputs) {
  return grad_enabled() && std::any_of(inputs.begin(), inputs.end(),
                                       [](const Tensor& t) { return t.requires_grad(); });
}

Grads::Grads(TapeEntry& entry, Walk& walk, const std::vector<Tensor>& douts)
    : entry_(entry), walk_(walk), douts_(douts) {}

bool Grads::wants(size_t i) const {
  check_index(i, "wants");
  return entry_.inputs[i] != nullptr;
}

void Grads::check_index(size_t i, const char* call) const {
  TG_CHECK(i < entry_.inputs.size(), "backward of '{}': {}({}), but the op has {} input(s)",
           entry_.op, call, i, entry_.inputs.size());
}

GradNode& Grads::node(size_t i, const char* call) {
  check_index(i, call);
  TG_CHECK(entry_.inputs[i] != nullptr,
           "backward of '{}': {}({}) for an input that does not require grad (ask wants({}) "
           "first)",
           entry_.op, call, i, i);
  GradNode& node = *entry_.inputs[i];
  if (!node.pending.defined() && !node.grad_fn) walk_.leaves.push_back(entry_.inputs[i]);
  return node;
}

Grads::Buffer Grads::write(size_t i, Writes writes) {
  TG_CHECK(!walk_.create_graph,
           "backward of '{}' writes its gradient into a buffer, so the gradient cannot be "
           "differentiated again (create_graph): write the backward in differentiable ops and "
           "pass() each gradient, and give the kernel as Derivative::fast (docs/custom_ops.md)",
           entry_.op);
  GradNode& n = node(i, "write");
  if (n.pending.defined()) return {n.pending, false};
  walk_.hold(n, writes == Writes::Every ? empty(n.shape, n.dtype) : zeros(n.shape, n.dtype));
  return {n.pending, writes == Writes::Every};
}

void Grads::pass(size_t i, const Tensor& g) {
  check_index(i, "pass");
  TG_CHECK(entry_.inputs[i] != nullptr,
           "backward of '{}': pass({}) for an input that does not require grad (ask wants({}) "
           "first)",
           entry_.op, i, i);
  const GradNode& n = *entry_.inputs[i];
  TG_CHECK(g.defined(), "backward of '{}': pass({}) of an undefined tensor", entry_.op, i);
  TG_CHECK(g.shape() == n.shape && g.dtype() == n.dtype,
           "backward of '{}': a gradient of shape {} and dtype {} was passed to input {} of shape "
           "{} and dtype {}",
           entry_.op, g.shape(), g.dtype(), i, n.shape, n.dtype);
  walk_.add(entry_.inputs[i], g.contiguous());
}

Tensor Grads::output(const Tensor& saved, size_t k) const {
  TG_CHECK(k < entry_.outputs.size(), "backward of '{}': output({}), but the op has {} output(s)",
           entry_.op, k, entry_.outputs.size());
  auto impl = std::make_shared<TensorImpl>(saved.impl());
  impl->node = entry_.outputs.at(k).lock();
  return Tensor(std::move(impl));
}

const Tensor& Grads::dout(size_t k) const {
  TG_CHECK(k < douts_.size(), "backward of '{}': dout({}), but the op has {} output(s)", entry_.op,
           k, douts_.size());
  return douts_[k];
}

Tensor Grads::input(size_t i, const Tensor& value) const {
  check_index(i, "input");
  auto impl = std::make_shared<TensorImpl>(value.impl());
  impl->node = entry_.inputs.at(i);
  return Tensor(std::move(impl));
}

void record(const char* op, const std::vector<Tensor>& inputs, Tensor& out, Derivative derivative,
            std::initializer_list<Saved> saved) {
  record(op, inputs, std::vector<Tensor*>{&out}, std::move(derivative), saved);
}

void record(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor*>& outs,
            Derivative derivative, std::initializer_list<Saved> saved) {
  check_record(op, outs, derivative);
  auto entry = std::make_shared<TapeEntry>();
  if (t_anomaly || t_details) [[unlikely]] {
    for (const Tensor& in : inputs)
      entry->input_shapes.push_back(in.defined() ? in.shape() : Shape{});
    for (const Saved& s : saved) {
      if (s.tensor.defined()) entry->saved.emplace_back(s.name, s.tensor);
    }
  }
  if (t_anomaly) [[unlikely]] {
    for (const Tensor* out : outs) {
      const Finite f = finiteness(*out);
      TG_CHECK(f != Finite::HasNaN, "anomaly: forward of op '{}' (inputs {}) produced NaN", op,
               shapes_of(entry->input_shapes));
      // inputs are scanned only when the output holds an Inf
      TG_CHECK(f != Finite::HasInf || derivative.allow_inf ||
                   std::any_of(inputs.begin(), inputs.end(),
                               [](const Tensor& in) { return finiteness(in) != Finite::Yes; }),
               "anomaly: forward of op '{}' (inputs {}) produced Inf from finite inputs", op,
               shapes_of(entry->input_shapes));
    }
  }
  entry->op = op;
  entry->seq = t_tape.next_seq++;
  entry->precision = t_autocast;
  if (profile::t_current) [[unlikely]]
    entry->module = profile::t_current->module();
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
  entry->derivative = std::move(derivative);

  for (Tensor* out : outs) {
    auto node = std::make_shared<GradNode>();
    node->shape = out->shape();
    node->dtype = out->dtype();
    node->grad_fn = entry;
    entry->outputs.push_back(node);
    out->impl().node = std::move(node);
  }

  if (t_walks == 0 && t_tape.entries.size() >= t_tape.compact_at) t_tape.compact();
  t_tape.entries.push_back(entry);
}

HookHandle register_hook(const std::shared_ptr<GradNode>& node, GradHook fn) {
  static std::atomic<uint64_t> next_id{1};
  const uint64_t id = next_id++;
  node->hooks.emplace_back(id, std::move(fn));
  return HookHandle(node, id);
}

void note_saved(const Tensor& out, std::vector<SavedBuffer> saved) {
  if (out.requires_grad() && out.impl().node->grad_fn)
    out.impl().node->grad_fn->saved = std::move(saved);
}

namespace {

// The reverse walk from `roots`, seeded with `seeds` (undefined: 1 for a one-element root).
class Walker {
 public:
  Walker(Walk& walk, bool retain_graph) : walk_(walk), retain_graph_(retain_graph) {}

  void run(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds) {
    const GradModeScope mode(walk_.create_graph);  // a create_graph walk records; others do not
    for (size_t r = 0; r < roots.size(); ++r) seed(roots, r, seeds[r]);
    if (!walk_.targets.empty() && any_entry_) find_needed();
    ++t_walks;  // entries recorded meanwhile go to the end; the indices below stay put
    struct Done {
      ~Done() { --t_walks; }
    } done;
    count_readers();
    auto& entries = t_tape.entries;
    std::vector<GradNode*> hooked;
    for (size_t i = any_entry_ ? entries.size() : 0; i-- > 0;) {
      std::shared_ptr<TapeEntry> e = entries[i].lock();
      if (!e || e->seq > max_seq_) continue;
      hooked.clear();
      if (!readers_.empty()) {
        for (const auto& in : e->inputs) {
          if (in && readers_.count(in.get())) hooked.push_back(in.get());
        }
      }
      if (reached(*e)) run_entry(e, walk_.targets.empty() || needed_.count(e.get()));
      for (GradNode* leaf : hooked) {
        if (--readers_[leaf] == 0 && leaf->pending.defined()) finish(*leaf);
      }
    }
    // A leaf's gradient is complete when the walk is over.
    for (const auto& leaf : walk_.leaves) {
      if (leaf->pending.defined()) finish(*leaf);
    }
    if (t_walks == 1) t_tape.compact();
  }

 private:
  void seed(const std::vector<Tensor>& roots, size_t r, Tensor seed) {
    const Tensor& root = roots[r];
    TG_CHECK(root.defined() && root.requires_grad(),
             "backward: {} does not require grad (no input of its graph requires grad, or it was "
             "computed under a NoGradGuard)",
             roots.size() == 1 ? std::string("the tensor") : fmt::format("output {}", r));
    if (!seed.defined()) {
      TG_CHECK(root.numel() == 1,
               "backward: an implicit gradient needs a one-element tensor, got shape {}; pass "
               "dout",
               root.shape());
      seed = ones(root.shape(), root.dtype());
    }
    TG_CHECK(seed.shape() == root.shape() && seed.dtype() == root.dtype(),
             "backward: dout has shape {} and dtype {}, the tensor has shape {} and dtype {}",
             seed.shape(), seed.dtype(), root.shape(), root.dtype());
    const std::shared_ptr<GradNode>& node = root.impl().node;
    if (const auto& fn = node->grad_fn) {
      TG_CHECK(fn->tape == &t_tape,
               "backward: the graph of this tensor (from op '{}') was recorded on another "
               "thread; call backward() on the thread that ran its forward",
               fn->op);
      max_seq_ = any_entry_ ? std::max(max_seq_, fn->seq) : fn->seq;
      any_entry_ = true;
    }
    // the walk adds into its buffers in place, so it starts from its own copy of the seed
    walk_.add(node, walk_.create_graph ? seed.contiguous() : seed.clone());
  }

  // grad() runs only the entries on a path from an input to the outputs.
  void find_needed() {
    const auto is_target = [&](const GradNode* n) {
      return std::find(walk_.targets.begin(), walk_.targets.end(), n) != walk_.targets.end();
    };
    for (const auto& w : t_tape.entries) {
      const auto e = w.lock();
      if (!e || e->seq > max_seq_) continue;
      for (const auto& in : e->inputs) {
        if (in && (is_target(in.get()) || (in->grad_fn && needed_.count(in->grad_fn.get())))) {
          needed_.insert(e.get());
          break;
        }
      }
    }
  }

  // A leaf with hooks is complete as soon as the last entry that reads it has run, not at the
  // walk's end, so its hooks (a gradient bucket's, parallel/gradient_sync.h) act while the
  // walk goes on: each such leaf counts the entries still to run that read it.
  void count_readers() {
    const auto& entries = t_tape.entries;
    for (size_t i = any_entry_ ? entries.size() : 0; i-- > 0;) {
      const auto e = entries[i].lock();
      if (!e || e->seq > max_seq_) continue;
      for (const auto& in : e->inputs) {
        if (in && !in->grad_fn && !in->hooks.empty()) ++readers_[in.get()];
      }
    }
  }

  // An entry runs once any of its outputs received a gradient in this walk.
  static bool reached(const TapeEntry& e) {
    return std::any_of(e.outputs.begin(), e.outputs.end(), [](const std::weak_ptr<GradNode>& w) {
      const auto node = w.lock();
      return node && node->pending.defined();
    });
  }

  void finish(GradNode& node) {
    walk_.complete(node);
    walk_.release(node);
  }

  void check_versions(const TapeEntry& e) const {
    for (size_t k = 0; k < e.versions.size(); ++k) {
      const auto storage = e.versions[k].storage.lock();
      TG_CHECK(!storage || storage->version() == e.versions[k].version,
               "backward: an input of op '{}' (input {} of {}) was modified in place after the op "
               "recorded it (version {} -> {}); its gradient would be wrong. Write to a copy, or "
               "recompute the op after the write",
               e.op, k, e.versions.size(), e.versions[k].version, storage->version());
    }
  }

  // Completes e's outputs' gradients and, when `wanted`, computes its inputs' (fast kernel,
  // backward or reference: tape.h's Derivative); then releases e unless retain_graph.
  void run_entry(const std::shared_ptr<TapeEntry>& e, bool wanted) {
    check_versions(*e);
    std::vector<Tensor> douts(e->outputs.size());
    for (size_t k = 0; k < e->outputs.size(); ++k) {
      const auto node = e->outputs[k].lock();
      if (!node || !node->pending.defined()) continue;
      douts[k] = walk_.complete(*node);
      walk_.release(*node);
    }
    if (!wanted) return;
    Grads grads(*e, walk_, douts);
    const profile::Scope profile_scope(e->op, true, &e->module);
    const Derivative& d = e->derivative;
    const AutocastGuard precision(e->precision);
    if (d.fast && !walk_.create_graph && !t_reference) {
      d.fast(douts[0], grads);
    } else if (d.backward) {
      d.backward(douts[0], grads);
    } else {
      differentiate_reference(*e, grads, douts);
    }
    if (t_anomaly && !e->input_shapes.empty()) [[unlikely]]
      check_finite_gradients(*e);
    if (retain_graph_) return;
    // Release: the output's gradient has been passed on, the saved buffers are not needed.
    e->derivative = Derivative{};
    std::move(e->inputs.begin(), e->inputs.end(), std::back_inserter(keep_alive_));
    e->inputs.clear();
    e->versions.clear();
    e->released = true;
  }

  // A composite entry's gradients: its reference is recomputed from the entry's inputs, which
  // appends the reference's primitives to the tape, and those entries are walked right away,
  // seeded with the composite's output gradients; they deliver into the composite's inputs.
  void differentiate_reference(const TapeEntry& e, Grads& grads, const std::vector<Tensor>& douts) {
    const size_t start = t_tape.entries.size();
    std::vector<Tensor> outs;
    {
      const GradModeScope record_it(true);
      outs = e.derivative.reference(grads);
    }
    TG_CHECK(outs.size() == e.outputs.size(),
             "backward of '{}': its reference gave {} output(s), the op has {}", e.op, outs.size(),
             e.outputs.size());
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!douts[k].defined() || !outs[k].requires_grad()) continue;
      walk_.add(outs[k].impl().node, douts[k]);
    }
    for (size_t i = t_tape.entries.size(); i-- > start;) {
      const auto inner = t_tape.entries[i].lock();
      if (inner && reached(*inner)) run_entry(inner, true);
    }
  }

  void check_finite_gradients(const TapeEntry& e) const {
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      if (!e.inputs[k]) continue;
      const Finite f = finiteness(e.inputs[k]->pending);
      const auto& producer = e.inputs[k]->grad_fn;
      TG_CHECK(f == Finite::Yes,
               "anomaly: backward of op '{}' (inputs {}) produced {} in the gradient of input {} "
               "{}, which came from {}",
               e.op, shapes_of(e.input_shapes), f == Finite::HasNaN ? "NaN" : "Inf", k,
               e.inputs[k]->shape,
               producer ? fmt::format("op '{}'", producer->op) : std::string("a leaf"));
    }
  }

  Walk& walk_;
  bool retain_graph_;
  bool any_entry_ = false;
  uint64_t max_seq_ = 0;
  std::unordered_set<const TapeEntry*> needed_;
  std::unordered_map<GradNode*, int64_t> readers_;
  // Processed entries give up their input nodes only after the walk: an intermediate tensor
  // the caller already dropped lives on in its node, which still has to receive its gradient.
  std::vector<std::shared_ptr<GradNode>> keep_alive_;
};

// A walk that throws (a tensor written in place, a kernel under create_graph, a hook's error)
// leaves no partial gradient behind for the next walk to add to.
void walk_back(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds, Walk& walk,
               bool retain_graph) {
  try {
    Walker(walk, retain_graph).run(roots, seeds);
  } catch (...) {
    for (const auto& leaf : walk.leaves) leaf->pending = Tensor();
    for (const auto& w : t_tape.entries) {
      const auto e = w.lock();
      if (!e) continue;
      for (const auto& out : e->outputs) {
        if (const auto node = out.lock()) node->pending = Tensor();
      }
    }
    throw;
  }
}

}  // namespace

void backward(const Tensor& root, const Tensor& dout, BackwardOptions options) {
  Walk walk;
  walk.create_graph = options.create_graph;
  walk_back({root}, {dout}, walk, options.retain_graph || options.create_graph);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, GradOptions options) {
  TG_CHECK(!outputs.empty(), "grad: no outputs given");
  TG_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
           "grad: {} grad_outputs for {} outputs", grad_outputs.size(), outputs.size());
  Walk walk;
  walk.create_graph = options.create_graph;
  walk.accumulate = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TG_CHECK(inputs[i].defined() && inputs[i].requires_grad(),
             "grad: input {} does not require grad", i);
    walk.targets.push_back(inputs[i].impl().node.get());
  }
  walk.captured.resize(inputs.size());
  const std::vector<Tensor> seeds =
      grad_outputs.empty() ? std::vector<Tensor>(outputs.size()) : grad_outputs;
  walk_back(outputs, seeds, walk, options.retain_graph || options.create_graph);
  for (size_t i = 0; i < inputs.size(); ++i) {
    TG_CHECK(walk.captured[i].defined() || options.allow_unused,
             "grad: input {} (shape {}) is not used by the outputs; pass allow_unused to get an "
             "undefined tensor for it",
             i, inputs[i].shape());
  }
  return walk.captured;
}

size_t tape_size() {
  return static_cast<size_t>(std::count_if(t_tape.entries.begin(), t_tape.entries.end(),
                                           [](const std::weak_ptr<TapeEntry>& w) {
                                             auto e = w.lock();
                                             return e && !e->released;
                                           }));
}

}  // namespace tapegrad
