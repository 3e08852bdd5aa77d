// Tensor: a handle to an n-dimensional array of float32, float64, int64 or bool.
//
// Storage is a flat buffer shared by handles; a tensor is a view of it: an offset, a shape and
// strides (in elements). New tensors are contiguous and row-major; the view ops (reshape,
// transpose, permute, slice, split) change only the view, and contiguous() packs a copy.
//
// A tensor that requires grad carries a GradNode: its accumulated gradient, its hooks and, for a
// non-leaf, the tape entry that produced it (tapegrad/autograd/tape.h).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "tapegrad/autograd/dtype.h"
#include "tapegrad/autograd/shape.h"
#include "tapegrad/autograd/storage.h"

// The engine (tensors, the tape, the ops, grad, gradcheck); the other parts nest inside it.
namespace tapegrad {

class Generator;
struct GradNode;
struct TapeEntry;

// How backward() runs (Tensor::backward). retain_graph keeps every saved buffer so the graph can
// be walked again; create_graph records the backward itself on the tape, so the gradients it
// leaves in .grad() can be differentiated again (and implies retain_graph, as in PyTorch).
struct BackwardOptions {
  bool retain_graph = false;
  bool create_graph = false;
};

// Removes the hook it was returned for (Tensor::register_hook); removing twice does nothing.
class HookHandle {
 public:
  HookHandle() = default;
  HookHandle(std::weak_ptr<GradNode> node, uint64_t id) : node_(std::move(node)), id_(id) {}
  void remove();

 private:
  std::weak_ptr<GradNode> node_;
  uint64_t id_ = 0;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Shape strides;  // in elements
  DType dtype = DType::Float32;
  std::shared_ptr<GradNode> node = nullptr;  // set when the tensor requires grad
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor: "no tensor", e.g. an absent bias
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t size(int64_t dim) const;  // negative dims count from the end
  int64_t numel() const { return tapegrad::numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  bool is_contiguous() const;

  // Pointer to the first element of this view; the layout is given by shape() and strides().
  // T must match dtype().
  template <class T>
  T* data() const {
    TG_CHECK(kDTypeOf<T> == dtype(), "data: tensor has dtype {}, asked for {}", dtype(),
             kDTypeOf<T>);
    return static_cast<T*>(impl().storage->data()) + impl().offset;
  }

  // The single element of a one-element tensor, converted to double.
  double item() const;
  // The element at a full index (negative indices count from the end), converted to double.
  double at(std::span<const int64_t> index) const;
  double at(std::initializer_list<int64_t> index) const {
    return at({index.begin(), index.size()});
  }
  // Writes one element. Not recorded on the tape: only for tensors that do not require grad,
  // or leaves under a NoGradGuard.
  void set(std::initializer_list<int64_t> index, double value);
  // All elements in row-major order, converted to T.
  template <class T>
  std::vector<T> to_vector() const;

  // Differentiable conversion (between float types; to int64/bool it cuts the graph). It and
  // clone are ops, recorded on the tape: they are defined with the shape ops
  // (ops/shape_ops.cpp).
  Tensor to(DType dtype) const;
  // Differentiable packed copy.
  Tensor clone() const;
  // This tensor packed row-major: itself when it already is, else a differentiable copy.
  Tensor contiguous() const;
  // Shares storage, but is a new leaf that does not require grad.
  Tensor detach() const;

  // Autograd. requires_grad may be set only on leaves.
  bool requires_grad() const { return impl().node != nullptr; }
  Tensor& set_requires_grad(bool requires_grad);
  bool is_leaf() const;
  // The op that made a non-leaf (what its repr shows as grad_fn), or null for a leaf.
  const char* grad_fn() const;
  // The accumulated gradient of a leaf, or of a non-leaf after retain_grad(); undefined until a
  // backward() reaches it (and always for other non-leaves, whose gradients are transient).
  Tensor grad() const;
  void zero_grad();
  // A non-leaf keeps its gradient in .grad() after each backward (summed over backwards).
  void retain_grad() const;
  // fn(grad) runs when this tensor's gradient in a backward (or grad()) is complete, before it
  // flows further; a defined return value replaces the gradient. Hooks run in registration
  // order, each on the previous one's result.
  HookHandle register_hook(std::function<Tensor(const Tensor& grad)> fn) const;
  // Reverse pass from this tensor (defined with the walk, walk.cpp). Without `dout` the tensor
  // must have one element and the seed gradient is 1; otherwise `dout` has this tensor's shape
  // and dtype.
  void backward(const Tensor& dout = Tensor(), BackwardOptions options = {}) const;

  TensorImpl& impl() const {
    TG_CHECK(impl_ != nullptr, "tensor: use of an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// A hook on a tensor's gradient (Tensor::register_hook): returns a replacement, or an undefined
// tensor to leave it as it is. A tensor's hooks are kept by handle id, in registration order.
using GradHook = std::function<Tensor(const Tensor& grad)>;
using GradHooks = std::vector<std::pair<uint64_t, GradHook>>;

// What a tensor that requires grad carries through the tape (TensorImpl::node).
struct GradNode {
  Shape shape;
  DType dtype = DType::Float32;
  // What .grad() shows: a leaf's gradient summed over backward() calls, or a non-leaf's when
  // retains_grad. Undefined until a backward reaches it.
  Tensor grad;
  // This backward's gradient, summed while the walk runs; handed on and cleared once complete.
  Tensor pending;
  std::shared_ptr<TapeEntry> grad_fn;  // the entry that produced this tensor; null for a leaf
  const char* op = nullptr;            // grad_fn's op, what Tensor::grad_fn() names
  bool retains_grad = false;
  GradHooks hooks;
};

// Adds fn to node's hooks (what Tensor::register_hook does for a tensor's node).
HookHandle register_hook(const std::shared_ptr<GradNode>& node, GradHook fn);

// Factories. Each makes a new contiguous leaf.
Tensor empty(const Shape& shape, DType dtype = DType::Float32);
Tensor zeros(const Shape& shape, DType dtype = DType::Float32);
Tensor ones(const Shape& shape, DType dtype = DType::Float32);
Tensor full(const Shape& shape, double value, DType dtype = DType::Float32);
Tensor zeros_like(const Tensor& t);
// [start, start + step, ...) up to but excluding end, like torch.arange.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::Int64);
Tensor arange(int64_t end, DType dtype = DType::Int64);
// A bool tensor's elements as bytes (0 or 1), for kernels: GCC vectorises byte loads, not
// bool ones.
inline uint8_t* mask_bytes(const Tensor& mask) {
  return reinterpret_cast<uint8_t*>(mask.data<bool>());
}

// From values in row-major order; values.size() must equal numel(shape).
Tensor tensor(std::span<const double> values, const Shape& shape, DType dtype = DType::Float32);
Tensor tensor(std::initializer_list<double> values, const Shape& shape,
              DType dtype = DType::Float32);
// A 1-D tensor of the values.
Tensor tensor(std::initializer_list<double> values, DType dtype = DType::Float32);
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape);
// Random draws from an explicit generator.
Tensor uniform(const Shape& shape, double low, double high, Generator& gen,
               DType dtype = DType::Float32);
Tensor normal(const Shape& shape, double mean, double stddev, Generator& gen,
              DType dtype = DType::Float32);
// int64 draws, uniform over [low, high), like torch.randint (random token ids).
Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen);

}  // namespace tapegrad
