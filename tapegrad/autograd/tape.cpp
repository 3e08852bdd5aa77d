// The tape's core, its recording half: the tape a thread keeps, record() appending an op's
// entry with the checks it owes (new outputs, inputs not from a released graph), and freeing a
// graph in a loop. The reverse walk is walk.cpp; how a backward hands it its gradients,
// grads.cpp.
#include "tapegrad/autograd/tape.h"

#include <algorithm>
#include <functional>

#include "tapegrad/autograd/anomaly.h"
#include "tapegrad/profile/profile.h"

namespace tapegrad {

namespace {

// An entry neither released nor freed with its graph.
bool live(const std::weak_ptr<TapeEntry>& w) {
  const auto e = w.lock();
  return e && !e->released;
}

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

thread_local detail::Tape t_tape;

}  // namespace

detail::Tape& detail::this_thread_tape() { return t_tape; }

void detail::Tape::compact() {
  std::erase_if(entries, std::not_fn(live));
  compact_at = std::max<size_t>(1024, 2 * entries.size());
}

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

  if (t_tape.walks == 0 && t_tape.entries.size() >= t_tape.compact_at) t_tape.compact();
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

size_t tape_size() { return static_cast<size_t>(std::ranges::count_if(t_tape.entries, live)); }

bool recording(const std::vector<Tensor>& inputs) {
  return grad_enabled() && std::any_of(inputs.begin(), inputs.end(),
                                       [](const Tensor& t) { return t.requires_grad(); });
}

}  // namespace tapegrad
