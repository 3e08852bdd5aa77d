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
#include "tapegrad/autograd/profile.h"
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
thread_local bool t_details = false;

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

// Recording on for a backward that creates a graph, whatever the caller's mode; off otherwise.
class GradModeScope {
 public:
  explicit GradModeScope(bool enabled) : previous_(t_grad_enabled) { t_grad_enabled = enabled; }
  ~GradModeScope() { t_grad_enabled = previous_; }
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

 private:
  bool previous_;
};

// dst += g, in place; dst's shape and dtype, either in any layout.
void add_in_place(Tensor& dst, const Tensor& g) {
  dispatch_floating("backward", dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    copy_strided(dst.data<T>(), dst.strides(), g.data<T>(), g.strides(), g.shape(), true);
  });
}

thread_local int t_walks = 0;  // walks running on this thread: the tape is not compacted then

}  // namespace

// One reverse walk: how it runs and what it leaves behind.
struct Walk {
  bool create_graph = false;
  bool accumulate = true;  // deliver into .grad(); false for grad(), which touches none
  std::vector<std::shared_ptr<GradNode>> leaves;  // leaves that received a gradient
  std::vector<const GradNode*> targets;           // grad()'s inputs
  std::vector<Tensor> captured;                   // and their gradients

  // Buffers that are some tensor's pending gradient in this walk, with what took them (for the
  // error). Only a walk that adds in place needs it: a create_graph walk never writes a buffer.
  std::unordered_map<const Storage*, const char*> held;

  // Makes g node's gradient buffer: refused if another gradient holds it already.
  void hold(GradNode& node, const Tensor& g, const char* op) {
    if (!create_graph) {
      const auto [it, fresh] = held.emplace(g.impl().storage.get(), op);
      TG_CHECK(fresh,
               "backward of '{}': a gradient buffer of shape {} was handed to a second tensor; it "
               "already holds the gradient from '{}'. Two gradients never share a buffer (the "
               "next += into one would change the other): pass a copy, or write() into the "
               "second tensor's own buffer",
               op, g.shape(), it->second);
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
  void add(const std::shared_ptr<GradNode>& node, const Tensor& g, const char* op) {
    if (!node->pending.defined()) {
      if (!node->grad_fn) leaves.push_back(node);
      hold(*node, g, op);
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
    BackwardFn backward;
    BackwardFn formula;
  };
  thread_local std::vector<Owned> queue;
  thread_local bool draining = false;
  if (inputs.empty() && !backward && !formula) return;
  queue.push_back({std::move(inputs), std::move(backward), std::move(formula)});
  if (draining) return;
  draining = true;
  while (!queue.empty()) {
    Owned next = std::move(queue.back());
    queue.pop_back();
  }  // `next` is freed here, possibly queueing more
  draining = false;
}

bool anomaly_enabled() { return t_anomaly; }
bool tape_details() { return t_details || t_anomaly; }
TapeDetailsGuard::TapeDetailsGuard() : previous_(t_details) { t_details = true; }
TapeDetailsGuard::~TapeDetailsGuard() { t_details = previous_; }
DetectAnomalyGuard::DetectAnomalyGuard() : previous_(t_anomaly) { t_anomaly = true; }
DetectAnomalyGuard::~DetectAnomalyGuard() { t_anomaly = previous_; }

bool grad_enabled() { return t_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }
EnableGradGuard::EnableGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = true; }
EnableGradGuard::~EnableGradGuard() { t_grad_enabled = previous_; }

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
  GradNode& n = node(i, "write");
  if (n.pending.defined()) return {n.pending, false};
  walk_.hold(n, writes == Writes::Every ? empty(n.shape, n.dtype) : zeros(n.shape, n.dtype),
             entry_.op);
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
  TG_CHECK(
      g.shape() == n.shape && g.dtype() == n.dtype && (walk_.create_graph || g.is_contiguous()),
      "backward of '{}': a gradient of shape {} and dtype {} was passed to input {} of shape "
      "{} and dtype {}",
      entry_.op, g.shape(), g.dtype(), i, n.shape, n.dtype);
  walk_.add(entry_.inputs[i], walk_.create_graph ? g.contiguous() : g, entry_.op);
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

void record(const char* op, const std::vector<Tensor>& inputs, Tensor& out, BackwardFn backward,
            BackwardFn formula, bool allow_inf) {
  record(op, inputs, std::vector<Tensor*>{&out}, std::move(backward), std::move(formula),
         allow_inf);
}

namespace {
// What record() is given by an op, a user's included: new tensors as outputs, and a backward.
void check_record(const char* op, const std::vector<Tensor*>& outs, const BackwardFn& backward) {
  TG_CHECK(!outs.empty(), "{}: an op records at least one output", op);
  TG_CHECK(backward != nullptr, "{}: record() needs a backward function", op);
  for (size_t k = 0; k < outs.size(); ++k) {
    TG_CHECK(outs[k] != nullptr && outs[k]->defined(), "{}: output {} is not a tensor", op, k);
    TG_CHECK(!outs[k]->impl().node,
             "{}: output {} already belongs to a graph (an input, or another op's output); an op "
             "records a new tensor",
             op, k);
  }
}
}  // namespace

void record(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor*>& outs,
            BackwardFn backward, BackwardFn formula, bool allow_inf) {
  check_record(op, outs, backward);
  auto entry = std::make_shared<TapeEntry>();
  if (t_anomaly || t_details) [[unlikely]] {
    for (const Tensor& in : inputs)
      entry->input_shapes.push_back(in.defined() ? in.shape() : Shape{});
  }
  if (t_anomaly) [[unlikely]] {
    for (const Tensor* out : outs) {
      const Finite f = finiteness(*out);
      TG_CHECK(f != Finite::HasNaN, "anomaly: forward of op '{}' (inputs {}) produced NaN", op,
               shapes_of(entry->input_shapes));
      // inputs are scanned only when the output holds an Inf
      TG_CHECK(f != Finite::HasInf || allow_inf ||
                   std::any_of(inputs.begin(), inputs.end(),
                               [](const Tensor& in) { return finiteness(in) != Finite::Yes; }),
               "anomaly: forward of op '{}' (inputs {}) produced Inf from finite inputs", op,
               shapes_of(entry->input_shapes));
    }
  }
  entry->op = op;
  entry->seq = t_tape.next_seq++;
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
  entry->backward = std::move(backward);
  entry->formula = std::move(formula);

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
void walk_back_unguarded(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds,
                         Walk& walk, bool retain_graph) {
  const GradModeScope mode(walk.create_graph);  // formulas record; kernels must not
  bool any_entry = false;
  uint64_t max_seq = 0;
  for (size_t r = 0; r < roots.size(); ++r) {
    const Tensor& root = roots[r];
    TG_CHECK(root.defined() && root.requires_grad(),
             "backward: {} does not require grad (no input of its graph requires grad, or it was "
             "computed under a NoGradGuard)",
             roots.size() == 1 ? std::string("the tensor") : fmt::format("output {}", r));
    Tensor seed = seeds[r];
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
      TG_CHECK(!fn->released,
               "backward: the graph of this tensor (from op '{}') was already released by an "
               "earlier backward(); pass retain_graph to that one to walk the graph twice",
               fn->op);
      max_seq = any_entry ? std::max(max_seq, fn->seq) : fn->seq;
      any_entry = true;
    }
    // the walk adds into its buffers in place, so it starts from its own copy of the seed
    walk.add(node, walk.create_graph ? seed.contiguous() : seed.clone(), "the seed");
  }

  auto& entries = t_tape.entries;
  // grad() runs only the entries on a path from an input to the outputs.
  std::unordered_set<const TapeEntry*> needed;
  const bool prune = !walk.targets.empty();
  auto is_target = [&](const GradNode* n) {
    return std::find(walk.targets.begin(), walk.targets.end(), n) != walk.targets.end();
  };
  if (prune && any_entry) {
    for (const auto& w : entries) {
      const auto e = w.lock();
      if (!e || e->seq > max_seq) continue;
      for (const auto& in : e->inputs) {
        if (in && (is_target(in.get()) || (in->grad_fn && needed.count(in->grad_fn.get())))) {
          needed.insert(e.get());
          break;
        }
      }
    }
  }

  ++t_walks;  // entries a formula records go to the end; the indices below stay put
  struct Done {
    ~Done() { --t_walks; }
  } done;
  // Processed entries give up their input nodes only after the walk: an intermediate tensor
  // the caller already dropped lives on in its node, which still has to receive its gradient.
  std::vector<std::shared_ptr<GradNode>> keep_alive;
  // A leaf with hooks is complete as soon as the last entry that reads it has run, not at the
  // walk's end, so its hooks (a gradient bucket's, parallel/gradient_sync.h) act while the
  // walk goes on: each such leaf counts the entries still to run that read it.
  std::unordered_map<GradNode*, int64_t> readers;
  for (size_t i = any_entry ? entries.size() : 0; i-- > 0;) {
    const auto e = entries[i].lock();
    if (!e || e->seq > max_seq) continue;
    for (const auto& in : e->inputs) {
      if (in && !in->grad_fn && !in->hooks.empty()) ++readers[in.get()];
    }
  }
  // An entry runs once any of its outputs received a gradient in this walk.
  const auto reached = [](const TapeEntry& e) {
    return std::any_of(e.outputs.begin(), e.outputs.end(), [](const std::weak_ptr<GradNode>& w) {
      const auto node = w.lock();
      return node && node->pending.defined();
    });
  };
  std::vector<Tensor> douts;
  const auto run_entry = [&](const std::shared_ptr<TapeEntry>& e) {
    TG_CHECK(!e->released,
             "backward: op '{}' of this graph was already released by an earlier backward(); "
             "pass retain_graph to that one to walk the graph twice",
             e->op);
    for (size_t k = 0; k < e->versions.size(); ++k) {
      const auto storage = e->versions[k].storage.lock();
      TG_CHECK(!storage || storage->version() == e->versions[k].version,
               "backward: an input of op '{}' (input {} of {}) was modified in place after the op "
               "recorded it (version {} -> {}); its gradient would be wrong. Write to a copy, or "
               "recompute the op after the write",
               e->op, k, e->versions.size(), e->versions[k].version, storage->version());
    }
    douts.assign(e->outputs.size(), Tensor());
    for (size_t k = 0; k < e->outputs.size(); ++k) {
      const auto node = e->outputs[k].lock();
      if (!node || !node->pending.defined()) continue;
      douts[k] = walk.complete(*node);
      walk.release(*node);
    }
    if (prune && !needed.count(e.get())) return;
    Grads grads(*e, walk, douts);
    const Tensor& dout = douts[0];
    const profile::Scope profile_scope(e->op, true, &e->module);
    if (walk.create_graph) {
      TG_CHECK(e->formula != nullptr,
               "backward: op '{}' has no gradient formula in differentiable ops, so its "
               "gradient cannot be differentiated again (create_graph); see docs/custom_ops.md",
               e->op);
      e->formula(dout, grads);
    } else {
      e->backward(dout, grads);
    }
    if (t_anomaly && !e->input_shapes.empty()) [[unlikely]] {
      for (size_t k = 0; k < e->inputs.size(); ++k) {
        if (!e->inputs[k]) continue;
        const Finite f = finiteness(e->inputs[k]->pending);
        const auto& producer = e->inputs[k]->grad_fn;
        TG_CHECK(f == Finite::Yes,
                 "anomaly: backward of op '{}' (inputs {}) produced {} in the gradient of input "
                 "{} {}, which came from {}",
                 e->op, shapes_of(e->input_shapes), f == Finite::HasNaN ? "NaN" : "Inf", k,
                 e->inputs[k]->shape,
                 producer ? fmt::format("op '{}'", producer->op) : std::string("a leaf"));
      }
    }
    if (retain_graph) return;
    // Release: the output's gradient has been passed on, the saved buffers are not needed.
    e->backward = nullptr;
    e->formula = nullptr;
    std::move(e->inputs.begin(), e->inputs.end(), std::back_inserter(keep_alive));
    e->inputs.clear();
    e->versions.clear();
    e->released = true;
  };
  std::vector<GradNode*> hooked;
  for (size_t i = any_entry ? entries.size() : 0; i-- > 0;) {
    std::shared_ptr<TapeEntry> e = entries[i].lock();
    if (!e || e->seq > max_seq) continue;
    hooked.clear();
    if (!readers.empty()) {
      for (const auto& in : e->inputs) {
        if (in && readers.count(in.get())) hooked.push_back(in.get());
      }
    }
    if (reached(*e)) run_entry(e);
    for (GradNode* leaf : hooked) {
      if (--readers[leaf] == 0 && leaf->pending.defined()) {
        walk.complete(*leaf);
        walk.release(*leaf);
      }
    }
  }
  // A leaf's gradient is complete when the walk is over.
  for (const auto& leaf : walk.leaves) {
    if (!leaf->pending.defined()) continue;
    walk.complete(*leaf);
    walk.release(*leaf);
  }
  if (t_walks == 1) t_tape.compact();
}

// A walk that throws (a tensor written in place, an op without a formula, a hook's error)
// leaves no partial gradient behind for the next walk to add to.
void walk_back(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds, Walk& walk,
               bool retain_graph) {
  try {
    walk_back_unguarded(roots, seeds, walk, retain_graph);
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
