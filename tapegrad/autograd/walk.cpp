// The reverse walk behind backward() and grad() (tape.h): from the roots' gradients back over
// the tape, newest entry first, each reached entry's backward delivering its inputs' gradients
// (Grads, grads.cpp) under the tape's one rule, with the checks a walk owes its user (the
// graph's thread, inputs written in place since, a graph already released).
#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "tapegrad/autograd/anomaly.h"
#include "tapegrad/autograd/hooks.h"
#include "tapegrad/autograd/strided.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/profile/profile.h"

namespace tapegrad {

namespace {

// Recording on for a backward that creates a graph, whatever the caller's mode; off otherwise.
using GradModeScope = ScopedMode<&detail::Modes::grad, true>;

// dst += g, in place; dst's shape and dtype, either in any layout.
void add_in_place(Tensor& dst, const Tensor& g) {
  dispatch_floating("backward", dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    copy_strided(dst.data<T>(), dst.strides(), g.data<T>(), g.strides(), g.shape(), true);
  });
}

}  // namespace

// One reverse walk (backward() or grad()): the gradients it holds while it runs, the entries it
// runs, and what it leaves behind.
struct Walk {
  // While a walk runs, entries recorded go to the tape's end and record() does not compact it:
  // the indices the walk goes by stay put.
  explicit Walk(const detail::WalkOptions& options) : options(options) { ++tape.walks; }
  // A walk that throws (a tensor written in place, a kernel under create_graph, a hook's error)
  // leaves no partial gradient behind for the next walk to add to.
  ~Walk() {
    --tape.walks;
    for (const auto& node : touched) node->pending = Tensor();
  }
  Walk(const Walk&) = delete;
  Walk& operator=(const Walk&) = delete;
  const detail::WalkOptions& options;
  const bool create_graph = options.create_graph;
  detail::Tape& tape = detail::this_thread_tape();
  // Every tensor that received a gradient in this walk. Holding their nodes keeps one the
  // caller dropped alive until its gradient is complete, and lets a walk that throws clear them.
  std::vector<std::shared_ptr<GradNode>> touched;
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
      touched.push_back(node);
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

  void run(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds) {
    const GradModeScope mode(create_graph);  // a create_graph walk records; others do not
    for (size_t r = 0; r < roots.size(); ++r) seed(roots, r, seeds[r]);
    const size_t end = any_entry ? tape.entries.size() : 0;
    plan(end);
    for (size_t i = end; i-- > 0;) {
      std::shared_ptr<TapeEntry> e = tape.entries[i].lock();
      if (!e || e->seq > max_seq) continue;
      if (reached(*e)) run_entry(e, options.targets.empty() || needed.count(e.get()));
      const auto hooked = first_readers.find(i);
      if (hooked == first_readers.end()) continue;
      for (const auto& leaf : hooked->second) {
        if (leaf->pending.defined()) finish(*leaf);
      }
    }
    // A leaf's gradient is complete when the walk is over.
    for (const auto& node : touched) {
      if (!node->grad_fn && node->pending.defined()) finish(*node);
    }
    if (tape.walks == 1) tape.compact();
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
      TG_CHECK(fn->tape == &tape,
               "backward: the graph of this tensor (from op '{}') was recorded on another "
               "thread; call backward() on the thread that ran its forward",
               fn->op);
      max_seq = any_entry ? std::max(max_seq, fn->seq) : fn->seq;
      any_entry = true;
    }
    // the walk adds into its buffers in place, so it starts from its own copy of the seed
    add(node, create_graph ? seed.contiguous() : seed.clone());
  }

  // One pass over the entries the walk will run, in execution order, for two extras. grad()
  // runs only the entries on a path from a target to the roots (`needed`). A leaf with hooks is
  // complete as soon as the first entry that reads it has run (the walk's last to), not at the
  // walk's end, so its hooks (a gradient bucket's, parallel/gradient_sync.h) act while the walk
  // goes on (`first_readers`).
  void plan(size_t end) {
    std::unordered_set<const GradNode*> seen;
    for (size_t i = 0; i < end; ++i) {
      const auto e = tape.entries[i].lock();
      if (!e || e->seq > max_seq) continue;
      for (const auto& in : e->inputs) {
        if (!in) continue;
        if (!options.targets.empty() && (std::ranges::count(options.targets, in.get()) ||
                                         (in->grad_fn && needed.count(in->grad_fn.get()))))
          needed.insert(e.get());
        if (!in->grad_fn && !in->hooks.empty() && seen.insert(in.get()).second)
          first_readers[i].push_back(in);
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
      check_gradient_anomaly(e->op, e->input_shapes, e->inputs);
    if (options.retain_graph) return;
    // Release: the output's gradient has been passed on, the saved buffers are not needed.
    e->derivative = Derivative{};
    e->inputs.clear();
    e->versions.clear();
    e->released = true;
  }

  // A composite entry's gradients: its reference is recomputed from the entry's inputs, which
  // appends the reference's primitives to the tape, and those entries are walked right away,
  // seeded with the composite's output gradients; they deliver into the composite's inputs.
  void differentiate_reference(const TapeEntry& e, Grads& grads, const std::vector<Tensor>& douts) {
    const size_t start = tape.entries.size();
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
    for (size_t i = tape.entries.size(); i-- > start;) {
      const auto inner = tape.entries[i].lock();
      if (inner && reached(*inner)) run_entry(inner, true);
    }
  }

  // The run's bookkeeping: whether a root came from an entry and the newest such entry, and
  // plan()'s two answers.
  bool any_entry = false;
  uint64_t max_seq = 0;
  std::unordered_set<const TapeEntry*> needed;
  std::unordered_map<size_t, std::vector<std::shared_ptr<GradNode>>> first_readers;
};

std::vector<Tensor> detail::reverse_pass(const std::vector<Tensor>& roots,
                                         const std::vector<Tensor>& seeds,
                                         const WalkOptions& options) {
  Walk walk(options);
  walk.run(roots, seeds);
  return std::move(walk.captured);
}

bool detail::creates_graph(const Walk& walk) { return walk.create_graph; }

void detail::deliver(Walk& walk, const std::shared_ptr<GradNode>& node, const Tensor& g) {
  walk.add(node, g);
}

void backward(const Tensor& root, const Tensor& dout, BackwardOptions options) {
  detail::reverse_pass({root}, {dout},
                       {.create_graph = options.create_graph,
                        .retain_graph = options.retain_graph || options.create_graph});
}

void Tensor::backward(const Tensor& dout, BackwardOptions options) const {
  tapegrad::backward(*this, dout, options);
}

}  // namespace tapegrad
