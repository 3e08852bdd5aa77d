// The tape's core: recording an op, the reverse walk with its checks (the graph's thread,
// inputs written in place since), how a backward delivers a gradient (Grads), freeing a graph
// in a loop, and a tensor's handle on all of it (requires_grad, grad, backward).
#include "tapegrad/autograd/tape.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tapegrad/autograd/anomaly.h"
#include "tapegrad/autograd/fast_kernel.h"
#include "tapegrad/autograd/hooks.h"
#include "tapegrad/autograd/strided.h"
#include "tapegrad/profile/profile.h"

namespace tapegrad {

namespace {

// An entry neither released nor freed with its graph.
bool live(const std::weak_ptr<TapeEntry>& w) {
  const auto e = w.lock();
  return e && !e->released;
}

struct Tape {
  std::vector<std::weak_ptr<TapeEntry>> entries;  // execution order
  uint64_t next_seq = 0;
  size_t compact_at = 1024;  // compact when entries reach this size

  // Drops references to entries that are not live.
  void compact() {
    std::erase_if(entries, std::not_fn(live));
    compact_at = std::max<size_t>(1024, 2 * entries.size());
  }
};

thread_local Tape t_tape;

// Recording on for a backward that creates a graph, whatever the caller's mode; off otherwise.
using GradModeScope = ScopedMode<&detail::Modes::grad, true>;

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

Tensor record(const char* op, const std::vector<Tensor>& inputs, Tensor& out, Derivative derivative,
              std::initializer_list<Saved> saved) {
  record(op, inputs, std::vector<Tensor*>{&out}, std::move(derivative), saved);
  return out;
}

void record(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor*>& outs,
            Derivative derivative, std::initializer_list<Saved> saved) {
  check_record(op, outs, derivative);
  auto entry = std::make_shared<TapeEntry>();
  if (tape_details()) [[unlikely]] {
    for (const Tensor& in : inputs)
      entry->input_shapes.push_back(in.defined() ? in.shape() : Shape{});
    for (const Saved& s : saved) {
      if (s.tensor.defined()) entry->saved.push_back({s.name, s.tensor.shape(), s.tensor.dtype()});
    }
  }
  if (anomaly_enabled()) [[unlikely]]
    check_forward_anomaly(op, inputs, outs, entry->input_shapes, derivative.allow_inf);
  entry->op = op;
  entry->seq = t_tape.next_seq++;
  entry->precision = detail::modes().autocast;
  if (profile::t_current) [[unlikely]]
    entry->module = profile::t_current->module();
  entry->tape = &t_tape;
  entry->inputs.reserve(inputs.size());
  entry->versions.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    if (in.defined()) entry->versions.push_back({in.impl().storage, in.impl().storage->version()});
    std::shared_ptr<GradNode> node = in.defined() ? in.impl().node : nullptr;
    TG_CHECK(!node || !node->grad_fn || !node->grad_fn->released,
             "{}: an input comes from op '{}', whose graph an earlier backward() already "
             "released; recompute it or detach() it",
             op, node->grad_fn->op);
    entry->inputs.push_back(std::move(node));
  }
  entry->derivative = std::move(derivative);

  for (Tensor* out : outs) {
    auto node = std::make_shared<GradNode>();
    node->shape = out->shape();
    node->dtype = out->dtype();
    node->grad_fn = entry;
    node->op = op;
    entry->outputs.push_back(node);
    out->impl().node = std::move(node);
  }

  if (t_walks == 0 && t_tape.entries.size() >= t_tape.compact_at) t_tape.compact();
  t_tape.entries.push_back(entry);
}

void note_saved(const Tensor& out, std::vector<SavedBuffer> saved) {
  if (out.requires_grad() && out.impl().node->grad_fn)
    out.impl().node->grad_fn->saved = std::move(saved);
}

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

// One reverse walk (backward() or grad()): the gradients it holds while it runs, the entries it
// runs, and what it leaves behind.
struct Walk {
  explicit Walk(const detail::WalkOptions& options) : options(options) {}
  const detail::WalkOptions& options;
  const bool create_graph = options.create_graph;
  std::vector<std::shared_ptr<GradNode>> leaves;  // leaves that received a gradient
  std::vector<Tensor> captured = std::vector<Tensor>(options.targets.size());  // the targets'

  // Buffers that are some tensor's pending gradient in this walk. Only a walk that adds in
  // place needs them: a create_graph walk never writes a buffer.
  std::unordered_set<const Storage*> held;

  // Makes g node's gradient buffer, or a copy of g when another gradient holds g's buffer
  // already (dout handed to both operands of an add): the next += into one must not change the
  // other.
  void hold(GradNode& node, const Tensor& g) {
    const bool shared = !create_graph && !held.insert(g.impl().storage.get()).second;
    node.pending = shared ? g.clone() : g;
    if (shared) held.insert(node.pending.impl().storage.get());
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
    const Tensor g = run_hooks(node.hooks, node.pending, node.shape, node.dtype, create_graph);
    // A non-leaf's gradient flows on into buffers the walk adds into: what is kept is a copy.
    const auto kept = [&] { return node.grad_fn && !create_graph ? g.clone() : g; };
    for (size_t i = 0; i < options.targets.size(); ++i) {
      if (options.targets[i] == &node) captured[i] = kept();
    }
    if (options.accumulate && (!node.grad_fn || node.retains_grad)) {
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

  // A walk that throws (a tensor written in place, a kernel under create_graph, a hook's error)
  // leaves no partial gradient behind for the next walk to add to.
  void run_or_clean(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds) {
    try {
      run(roots, seeds);
    } catch (...) {
      for (const auto& leaf : leaves) leaf->pending = Tensor();
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

  void run(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds) {
    const GradModeScope mode(create_graph);  // a create_graph walk records; others do not
    for (size_t r = 0; r < roots.size(); ++r) seed(roots, r, seeds[r]);
    if (!options.targets.empty() && any_entry) find_needed();
    ++t_walks;  // entries recorded meanwhile go to the end; the indices below stay put
    struct Done {
      ~Done() { --t_walks; }
    } done;
    count_readers();
    auto& entries = t_tape.entries;
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
      if (reached(*e)) run_entry(e, options.targets.empty() || needed.count(e.get()));
      for (GradNode* leaf : hooked) {
        if (--readers[leaf] == 0 && leaf->pending.defined()) finish(*leaf);
      }
    }
    // A leaf's gradient is complete when the walk is over.
    for (const auto& leaf : leaves) {
      if (leaf->pending.defined()) finish(*leaf);
    }
    if (t_walks == 1) t_tape.compact();
  }

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
      max_seq = any_entry ? std::max(max_seq, fn->seq) : fn->seq;
      any_entry = true;
    }
    // the walk adds into its buffers in place, so it starts from its own copy of the seed
    add(node, create_graph ? seed.contiguous() : seed.clone());
  }

  // grad() runs only the entries on a path from an input to the outputs.
  void find_needed() {
    const auto is_target = [&](const GradNode* n) {
      return std::find(options.targets.begin(), options.targets.end(), n) != options.targets.end();
    };
    for (const auto& w : t_tape.entries) {
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

  // A leaf with hooks is complete as soon as the last entry that reads it has run, not at the
  // walk's end, so its hooks (a gradient bucket's, parallel/gradient_sync.h) act while the
  // walk goes on: each such leaf counts the entries still to run that read it.
  void count_readers() {
    const auto& entries = t_tape.entries;
    for (size_t i = any_entry ? entries.size() : 0; i-- > 0;) {
      const auto e = entries[i].lock();
      if (!e || e->seq > max_seq) continue;
      for (const auto& in : e->inputs) {
        if (in && !in->grad_fn && !in->hooks.empty()) ++readers[in.get()];
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

  // node's gradient completed (complete()) and its buffer released: what flows on.
  Tensor finish(GradNode& node) {
    const Tensor g = complete(node);
    release(node);
    return g;
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
      if (node && node->pending.defined()) douts[k] = finish(*node);
    }
    if (!wanted) return;
    Grads grads(*e, *this, douts);
    const profile::Scope profile_scope(e->op, true, &e->module);
    const Derivative& d = e->derivative;
    const AutocastGuard precision(e->precision);
    if (d.fast && !create_graph && !reference_mode()) {
      d.fast(douts[0], grads);
    } else if (d.backward) {
      d.backward(douts[0], grads);
    } else {
      differentiate_reference(*e, grads, douts);
    }
    if (anomaly_enabled() && !e->input_shapes.empty()) [[unlikely]]
      check_finite_gradients(*e);
    if (options.retain_graph) return;
    // Release: the output's gradient has been passed on, the saved buffers are not needed.
    e->derivative = Derivative{};
    std::move(e->inputs.begin(), e->inputs.end(), std::back_inserter(keep_alive));
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
      add(outs[k].impl().node, douts[k]);
    }
    for (size_t i = t_tape.entries.size(); i-- > start;) {
      const auto inner = t_tape.entries[i].lock();
      if (inner && reached(*inner)) run_entry(inner, true);
    }
  }

  static void check_finite_gradients(const TapeEntry& e) {
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      if (!e.inputs[k]) continue;
      const auto& producer = e.inputs[k]->grad_fn;
      check_gradient_anomaly(e.op, e.input_shapes, k, e.inputs[k]->pending, e.inputs[k]->shape,
                             producer ? producer->op : nullptr);
    }
  }

  // The run's bookkeeping: whether a root came from an entry and the newest such entry, the
  // entries grad() needs, each hooked leaf's readers still to run.
  bool any_entry = false;
  uint64_t max_seq = 0;
  std::unordered_set<const TapeEntry*> needed;
  std::unordered_map<GradNode*, int64_t> readers;
  // Processed entries give up their input nodes only after the walk: an intermediate tensor
  // the caller already dropped lives on in its node, which still has to receive its gradient.
  std::vector<std::shared_ptr<GradNode>> keep_alive;
};

Grads::Grads(TapeEntry& entry, Walk& walk, const std::vector<Tensor>& douts)
    : entry_(entry), walk_(walk), douts_(douts) {}

bool Grads::wants(size_t i) const { return input_node(i, "wants") != nullptr; }

const std::shared_ptr<GradNode>& Grads::input_node(size_t i, const char* call) const {
  TG_CHECK(i < entry_.inputs.size(), "backward of '{}': {}({}), but the op has {} input(s)",
           entry_.op, call, i, entry_.inputs.size());
  return entry_.inputs[i];
}

GradNode& Grads::node(size_t i, const char* call) const {
  TG_CHECK(input_node(i, call) != nullptr,
           "backward of '{}': {}({}) for an input that does not require grad (ask wants({}) "
           "first)",
           entry_.op, call, i, i);
  return *entry_.inputs[i];
}

GradBuffer Grads::write(size_t i, Writes writes) {
  TG_CHECK(!walk_.create_graph,
           "backward of '{}' writes its gradient into a buffer, so the gradient cannot be "
           "differentiated again (create_graph): write the backward in differentiable ops and "
           "pass() each gradient, and give the kernel as Derivative::fast (docs/custom_ops.md)",
           entry_.op);
  GradNode& n = node(i, "write");
  if (n.pending.defined()) return {n.pending, false};
  if (!n.grad_fn) walk_.leaves.push_back(entry_.inputs[i]);
  walk_.hold(n, writes == Writes::Every ? empty(n.shape, n.dtype) : zeros(n.shape, n.dtype));
  return {n.pending, writes == Writes::Every};
}

void Grads::pass(size_t i, const Tensor& g) {
  const GradNode& n = node(i, "pass");
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
  auto impl = std::make_shared<TensorImpl>(value.impl());
  impl->node = input_node(i, "input");
  return Tensor(std::move(impl));
}

std::vector<Tensor> detail::reverse_pass(const std::vector<Tensor>& roots,
                                         const std::vector<Tensor>& seeds,
                                         const WalkOptions& options) {
  Walk walk(options);
  walk.run_or_clean(roots, seeds);
  return std::move(walk.captured);
}

void backward(const Tensor& root, const Tensor& dout, BackwardOptions options) {
  detail::reverse_pass({root}, {dout},
                       {.create_graph = options.create_graph,
                        .retain_graph = options.retain_graph || options.create_graph});
}

size_t tape_size() { return static_cast<size_t>(std::ranges::count_if(t_tape.entries, live)); }

bool recording(const std::vector<Tensor>& inputs) {
  return grad_enabled() && std::any_of(inputs.begin(), inputs.end(),
                                       [](const Tensor& t) { return t.requires_grad(); });
}

void Tensor::backward(const Tensor& dout, BackwardOptions options) const {
  tapegrad::backward(*this, dout, options);
}

}  // namespace tapegrad
