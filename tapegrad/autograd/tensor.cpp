// Tensor: element access, conversions, autograd state on the handle (requires_grad, grad,
// hooks) and the factories. Storage and its allocator are in storage.cpp; backward() is the
// walk's (walk.cpp); printing is a client of the tensor's (tapegrad/viz/print.h).
#include "tapegrad/autograd/tensor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <span>
#include <string_view>

#include "tapegrad/autograd/modes.h"
#include "tapegrad/autograd/random.h"
#include "tapegrad/autograd/strided.h"

namespace tapegrad {

// ---------------------------------------------------------------------------------------------
// Element access

namespace {

// Offset of a full index into the view, validated against the shape.
int64_t element_offset(const Tensor& t, std::string_view op, std::span<const int64_t> index) {
  TG_CHECK(static_cast<int64_t>(index.size()) == t.dim(),
           "{}: index has {} entries for a tensor of shape {}", op, index.size(), t.shape());
  int64_t off = t.offset();
  int64_t d = 0;
  for (int64_t i : index) {
    const int64_t n = t.shape()[d];
    TG_CHECK(i >= -n && i < n, "{}: index {} out of range for dim {} of shape {}", op, i, d,
             t.shape());
    off += (i < 0 ? i + n : i) * t.strides()[d];
    ++d;
  }
  return off;
}

double read_as_double(const Tensor& t, int64_t storage_offset) {
  return dispatch_all(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return static_cast<double>(static_cast<const T*>(t.impl().storage->data())[storage_offset]);
  });
}

// A tensor of draw() in each element, in order.
template <class Draw>
Tensor drawn(const char* op, const Shape& shape, DType dtype, Draw draw) {
  Tensor t = empty(shape, dtype);
  dispatch_floating(op, dtype, [&](auto tag) {
    using T = decltype(tag);
    for (T& v : std::span(t.data<T>(), static_cast<size_t>(t.numel()))) v = static_cast<T>(draw());
  });
  return t;
}

}  // namespace

int64_t Tensor::size(int64_t dim) const { return shape()[normalize_dim("size", dim, this->dim())]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape().size(); i-- > 0;) {
    if (shape()[i] != 1 && strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

double Tensor::item() const {
  TG_CHECK(numel() == 1, "item: tensor of shape {} has {} elements, not one", shape(), numel());
  return read_as_double(*this, offset());
}

double Tensor::at(std::span<const int64_t> index) const {
  return read_as_double(*this, element_offset(*this, "at", index));
}

void Tensor::set(std::initializer_list<int64_t> index, double value) {
  TG_CHECK(!requires_grad() || (is_leaf() && !grad_enabled()),
           "set: in-place write to a tensor that requires grad; use a NoGradGuard for leaves");
  const int64_t off = element_offset(*this, "set", {index.begin(), index.size()});
  impl().storage->bump_version();
  dispatch_all(dtype(), [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(impl().storage->data())[off] = static_cast<T>(value);
  });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  std::vector<T> out;
  out.reserve(numel());
  const Shape& st = strides();
  dispatch_all(dtype(), [&](auto tag) {
    using S = decltype(tag);
    const S* src = static_cast<const S*>(impl().storage->data()) + offset();
    for_each_offset<1>(shape(), {&st},
                       [&](const auto& o) { out.push_back(static_cast<T>(src[o[0]])); });
  });
  return out;
}
template std::vector<float> Tensor::to_vector() const;
template std::vector<double> Tensor::to_vector() const;
template std::vector<int64_t> Tensor::to_vector() const;
template std::vector<bool> Tensor::to_vector() const;

// ---------------------------------------------------------------------------------------------
// Copies and conversions

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>(this->impl());
  impl->node = nullptr;
  return Tensor(std::move(impl));
}

// ---------------------------------------------------------------------------------------------
// Autograd state

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  TG_CHECK(is_leaf(), "set_requires_grad: only leaves can change requires_grad; detach() first");
  if (!requires_grad) {
    impl().node = nullptr;
  } else if (!impl().node) {
    TG_CHECK(is_floating(dtype()), "set_requires_grad: only float tensors can require grad, got {}",
             dtype());
    impl().node = std::make_shared<GradNode>();
    impl().node->shape = shape();
    impl().node->dtype = dtype();
  }
  return *this;
}

bool Tensor::is_leaf() const { return !impl().node || !impl().node->grad_fn; }

const char* Tensor::grad_fn() const { return impl().node ? impl().node->op : nullptr; }

Tensor Tensor::grad() const { return impl().node ? impl().node->grad : Tensor(); }

void Tensor::zero_grad() {
  if (impl().node) impl().node->grad = Tensor();
}

void Tensor::retain_grad() const {
  TG_CHECK(requires_grad(), "retain_grad: the tensor does not require grad");
  impl().node->retains_grad = true;
}

HookHandle Tensor::register_hook(GradHook fn) const {
  TG_CHECK(requires_grad(),
           "register_hook: the tensor does not require grad, so it has no "
           "gradient to hook");
  return tapegrad::register_hook(impl().node, std::move(fn));
}

void HookHandle::remove() {
  if (const auto node = node_.lock())
    std::erase_if(node->hooks, [&](const auto& h) { return h.first == id_; });
  node_.reset();
}

HookHandle register_hook(const std::shared_ptr<GradNode>& node, GradHook fn) {
  static std::atomic<uint64_t> next_id{1};
  const uint64_t id = next_id++;
  node->hooks.emplace_back(id, std::move(fn));
  return HookHandle(node, id);
}

// ---------------------------------------------------------------------------------------------
// Factories

Tensor empty(const Shape& shape, DType dtype) {
  // 2^40 bytes (1 TiB): past this project's machines' memory, far from size_t's overflow, and
  // the largest request AddressSanitizer's allocator accepts
  constexpr int64_t kMaxBytes = int64_t{1} << 40;
  const int64_t n = numel(shape);
  TG_CHECK(n <= kMaxBytes / static_cast<int64_t>(dtype_size(dtype)),
           "empty: shape {} of {} needs {} elements, more than any buffer can hold", shape, dtype,
           n);
  std::shared_ptr<Storage> storage;
  try {
    storage = std::make_shared<Storage>(static_cast<size_t>(n) * dtype_size(dtype));
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("empty: cannot allocate {} bytes for shape {} of {}",
                            static_cast<size_t>(n) * dtype_size(dtype), shape, dtype));
  }
  return Tensor(std::make_shared<TensorImpl>(TensorImpl{.storage = std::move(storage),
                                                        .shape = shape,
                                                        .strides = contiguous_strides(shape),
                                                        .dtype = dtype}));
}

Tensor full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    std::fill_n(t.data<T>(), t.numel(), static_cast<T>(value));
  });
  return t;
}

Tensor zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.impl().storage->data(), 0, t.impl().storage->nbytes());
  return t;
}

Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }

Tensor arange(double start, double end, double step, DType dtype) {
  TG_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
           "arange: bad range start={} end={} step={}", start, end, step);
  const auto n = static_cast<int64_t>(std::max(0.0, std::ceil((end - start) / step)));
  Tensor t = empty({n}, dtype);
  dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return t;
}

Tensor arange(int64_t end, DType dtype) {
  return arange(0.0, static_cast<double>(end), 1.0, dtype);
}

Tensor tensor(std::span<const double> values, const Shape& shape, DType dtype) {
  TG_CHECK(static_cast<int64_t>(values.size()) == numel(shape),
           "tensor: {} values for shape {} ({} elements)", values.size(), shape, numel(shape));
  Tensor t = empty(shape, dtype);
  dispatch_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    std::transform(values.begin(), values.end(), t.data<T>(),
                   [](double v) { return static_cast<T>(v); });
  });
  return t;
}

Tensor tensor(std::initializer_list<double> values, const Shape& shape, DType dtype) {
  return tensor(std::span<const double>(values.begin(), values.size()), shape, dtype);
}

Tensor tensor(std::initializer_list<double> values, DType dtype) {
  return tensor(values, {static_cast<int64_t>(values.size())}, dtype);
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  TG_CHECK(static_cast<int64_t>(values.size()) == numel(shape),
           "from_vector: {} values for shape {} ({} elements)", values.size(), shape, numel(shape));
  Tensor t = empty(shape, kDTypeOf<T>);
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}
template Tensor from_vector(const std::vector<float>&, const Shape&);
template Tensor from_vector(const std::vector<double>&, const Shape&);
template Tensor from_vector(const std::vector<int64_t>&, const Shape&);

Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype) {
  TG_CHECK(low <= high, "uniform: low {} is above high {}", low, high);
  return drawn("uniform", shape, dtype, [&] { return low + (high - low) * gen.uniform(); });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen) {
  TG_CHECK(low < high, "randint: empty range [{}, {})", low, high);
  Tensor t = empty(shape, DType::Int64);
  int64_t* p = t.data<int64_t>();
  const auto span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  for (int64_t i = 0, n = t.numel(); i < n; ++i) {
    p[i] = static_cast<int64_t>(static_cast<uint64_t>(low) + gen.below(span));
  }
  return t;
}

Tensor normal(const Shape& shape, double mean, double stddev, Generator& gen, DType dtype) {
  TG_CHECK(stddev >= 0, "normal: negative stddev {}", stddev);
  return drawn("normal", shape, dtype, [&] { return mean + stddev * gen.normal(); });
}

}  // namespace tapegrad
