// Grads: how an op's backward delivers its inputs' gradients into the walk (tape.h), by
// passing a tensor or, for a fast kernel, writing into the buffer it is given
// (fast_kernel.h). Every misuse a user's op can make of it is named in its error.
#include "tapegrad/autograd/fast_kernel.h"
#include "tapegrad/autograd/tape.h"

namespace tapegrad {

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
  TG_CHECK(!detail::creates_graph(walk_),
           "backward of '{}' writes its gradient into a buffer, so the gradient cannot be "
           "differentiated again (create_graph): write the backward in differentiable ops and "
           "pass() each gradient, and give the kernel as Derivative::fast (docs/custom_ops.md)",
           entry_.op);
  GradNode& n = node(i, "write");
  if (n.pending.defined()) return {n.pending, false};
  detail::deliver(walk_, entry_.inputs[i],
                  writes == Writes::Every ? empty(n.shape, n.dtype) : zeros(n.shape, n.dtype));
  return {n.pending, writes == Writes::Every};
}

void Grads::pass(size_t i, const Tensor& g) {
  const GradNode& n = node(i, "pass");
  TG_CHECK(g.defined(), "backward of '{}': pass({}) of an undefined tensor", entry_.op, i);
  TG_CHECK(g.shape() == n.shape && g.dtype() == n.dtype,
           "backward of '{}': a gradient of shape {} and dtype {} was passed to input {} of shape "
           "{} and dtype {}",
           entry_.op, g.shape(), g.dtype(), i, n.shape, n.dtype);
  detail::deliver(walk_, entry_.inputs[i], g.contiguous());
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

}  // namespace tapegrad
