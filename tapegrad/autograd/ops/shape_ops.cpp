// Shape ops. A view op builds a TensorImpl over the same storage with a new offset, shape and
// strides; its backward maps the view's gradient back onto the input's layout (a reshape passes
// dout on as it is, a permutation reads dout through permuted strides, a slice adds into a
// window).
#include "tapegrad/autograd/ops/shape_ops.h"

#include <algorithm>
#include <numeric>

#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/ops/registry.h"
#include "tapegrad/autograd/strided.h"
#include "tapegrad/autograd/tape.h"

namespace tapegrad {

namespace {

Tensor make_view(const Tensor& x, int64_t offset, Shape shape, Shape strides) {
  return Tensor(std::make_shared<TensorImpl>(TensorImpl{.storage = x.impl().storage,
                                                        .offset = offset,
                                                        .shape = std::move(shape),
                                                        .strides = std::move(strides),
                                                        .dtype = x.dtype()}));
}

// dx of a slice: dout's rows at s, s + step, ... of n rows along d, zeros elsewhere; written in
// differentiable ops, so a second derivative passes through it
Tensor unslice(const Tensor& dout, int64_t d, int64_t s, int64_t step, int64_t n) {
  Tensor spread = dout;
  if (step > 1) {  // each row followed by step - 1 rows of zeros, cut at the input's end
    Shape gap = unsqueeze(dout, d + 1).shape(), rows = dout.shape();
    gap[d + 1] = step - 1;
    rows[d] *= step;
    spread = reshape(concat({unsqueeze(dout, d + 1), zeros(gap, dout.dtype())}, d + 1), rows);
    spread = slice(spread, d, 0, std::min(rows[d], n - s));
  }
  std::vector<Tensor> parts;
  Shape pad = dout.shape();
  if (s > 0) parts.push_back(zeros((pad[d] = s, pad), dout.dtype()));
  parts.push_back(spread);
  if (const int64_t after = n - s - spread.shape()[d]; after > 0) {
    parts.push_back(zeros((pad[d] = after, pad), dout.dtype()));
  }
  return parts.size() == 1 ? spread : concat(parts, d);
}

// A view of x's elements in their order under a new shape (view, squeeze, unsqueeze).
Tensor same_elements(const char* op, const Tensor& x, const Shape& shape, const Shape& strides) {
  return run_op(op, [&] {
    Tensor out = make_view(x, x.offset(), shape, strides);
    if (!recording(x)) return out;
    // d view(x) / dx: the same elements in the same order, dx += dout, passed on as a view
    return record(op, {x}, out, {.backward = [x_shape = x.shape()](const Tensor& dout, Grads& g) {
                    g.pass(0, reshape(dout, x_shape));
                  }});
  });
}

}  // namespace

Tensor view(const Tensor& x, const Shape& requested) {
  Shape shape = requested;
  int64_t known = 1;
  auto infer = shape.end();
  for (auto it = shape.begin(); it != shape.end(); ++it) {
    if (*it == -1) {
      TG_CHECK(infer == shape.end(), "view: more than one -1 in {}", requested);
      infer = it;
    } else {
      TG_CHECK(*it >= 0, "view: invalid size {} in {}", *it, requested);
      TG_CHECK(!__builtin_mul_overflow(known, *it, &known),
               "view: shape {} has more elements than int64 can count", requested);
    }
  }
  if (infer != shape.end()) {
    TG_CHECK(known != 0 && x.numel() % known == 0, "view: cannot view shape {} ({} elements) as {}",
             x.shape(), x.numel(), requested);
    *infer = x.numel() / known;
  }
  TG_CHECK(numel(shape) == x.numel(), "view: cannot view shape {} ({} elements) as {}", x.shape(),
           x.numel(), requested);
  TG_CHECK(x.is_contiguous(),
           "view: tensor of shape {} with strides {} is not contiguous; use reshape()", x.shape(),
           x.strides());
  return same_elements(op_name("view"), x, shape, contiguous_strides(shape));
}

Tensor reshape(const Tensor& x, const Shape& shape) { return view(x.contiguous(), shape); }

// A size-1 dim is a view whatever the layout: its stride is never stepped.
Tensor unsqueeze(const Tensor& x, int64_t dim) {
  const int64_t d = normalize_dim("unsqueeze", dim, x.dim() + 1);
  Shape shape = x.shape(), strides = x.strides();
  const int64_t stride = d < x.dim() ? strides[d] * shape[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return same_elements(op_name("unsqueeze"), x, shape, strides);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  const int64_t d = normalize_dim("squeeze", dim, x.dim());
  TG_CHECK(x.shape()[d] == 1, "squeeze: dim {} of shape {} has size {}, not 1", dim, x.shape(),
           x.shape()[d]);
  Shape shape = x.shape(), strides = x.strides();
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  return same_elements(op_name("squeeze"), x, shape, strides);
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  return run_op(op_name("permute"), [&] {
    TG_CHECK(static_cast<int64_t>(dims.size()) == x.dim(),
             "permute: {} dims given for a tensor of shape {}", dims.size(), x.shape());
    std::vector<int64_t> perm(dims.size());
    std::vector<bool> seen(dims.size(), false);
    for (size_t i = 0; i < dims.size(); ++i) {
      perm[i] = normalize_dim("permute", dims[i], x.dim());
      TG_CHECK(!seen[perm[i]], "permute: dim {} repeated in {}", dims[i], dims);
      seen[perm[i]] = true;
    }
    Shape shape(perm.size()), strides(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      shape[i] = x.shape()[perm[i]];
      strides[i] = x.strides()[perm[i]];
    }
    Tensor out = make_view(x, x.offset(), shape, strides);
    if (!recording(x)) return out;
    // out[.., i_k, ..] = x[.., i_perm[k], ..], so dx reads dout with input dim perm[k] taking
    // output dim k's stride.
    return record(op_name("permute"), {x}, out, {.backward = [perm](const Tensor& dout, Grads& g) {
                    std::vector<int64_t> inverse(perm.size());
                    for (size_t k = 0; k < perm.size(); ++k)
                      inverse[perm[k]] = static_cast<int64_t>(k);
                    g.pass(0, permute(dout, inverse));
                  }});
  });
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  std::vector<int64_t> dims(x.dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[normalize_dim("transpose", dim0, x.dim())],
            dims[normalize_dim("transpose", dim1, x.dim())]);
  return permute(x, dims);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return run_op(op_name("slice"), [&] {
    const int64_t d = normalize_dim("slice", dim, x.dim());
    const int64_t n = x.shape()[d];
    const int64_t s = start < 0 ? start + n : start;
    const int64_t e = end < 0 ? end + n : end;
    TG_CHECK(s >= 0 && e <= n && s <= e,
             "slice: range [{}, {}) out of bounds for dim {} of shape {}", start, end, dim,
             x.shape());
    TG_CHECK(step >= 1, "slice: step must be positive, got {}", step);
    Shape shape = x.shape(), strides = x.strides();
    shape[d] = (e - s + step - 1) / step;
    strides[d] *= step;
    Tensor out = make_view(x, x.offset() + s * x.strides()[d], shape, strides);
    if (!recording(x)) return out;
    // dx[.., s:e:step, ..] += dout
    return record(op_name("slice"), {x}, out,
                  {.backward = [d, s, step, n](const Tensor& dout, Grads& g) {
                    g.pass(0, unslice(dout, d, s, step, n));
                  }});
  });
}

// Tensor's copies, recorded as ops: to, clone, contiguous.

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  return run_op(op_name("to"), [&] {
    Tensor out = empty(shape(), target);
    dispatch_all(dtype(), [&](auto src_tag) {
      using S = decltype(src_tag);
      dispatch_all(target, [&](auto dst_tag) {
        using D = decltype(dst_tag);
        const S* src = data<S>();
        D* dst = out.data<D>();
        for_each_offset<2>(shape(), {&out.strides(), &strides()},
                           [&](const auto& o) { dst[o[0]] = static_cast<D>(src[o[1]]); });
      });
    });
    if (!(is_floating(target) && is_floating(dtype()) && recording(*this))) return out;
    // d(to(x))/dx = 1: the gradient converted back to x's dtype.
    return record(
        op_name("to"), {*this}, out,
        {.backward = [source = dtype()](const Tensor& d, Grads& g) { g.pass(0, d.to(source)); }});
  });
}

Tensor Tensor::clone() const {
  const char* op = is_contiguous() ? op_name("clone") : op_name("contiguous");
  return run_op(op, [&] {
    Tensor out = empty(shape(), dtype());
    dispatch_all(dtype(), [&](auto tag) {
      using T = decltype(tag);
      copy_strided(out.data<T>(), out.strides(), data<T>(), strides(), shape(), false);
    });
    if (!recording(*this)) return out;
    // d(copy(x))/dx = 1
    return record(op, {*this}, out, {.backward = [](const Tensor& d, Grads& g) { g.pass(0, d); }});
  });
}

void assign(const Tensor& dst, const Tensor& src) {
  TG_CHECK(!(grad_enabled() && dst.requires_grad()),
           "assign: an in-place write into a tensor that requires grad (write under no_grad, or "
           "into a tensor that does not require grad)");
  const Shape shape = broadcast_shapes("assign", dst.shape(), src.shape());
  TG_CHECK(shape == dst.shape(), "assign: a value of shape {} does not broadcast to shape {}",
           src.shape(), dst.shape());
  // a source that shares the storage (x[1:] = x[:-1]) is read from a copy
  const Tensor from = src.impl().storage == dst.impl().storage ? src.detach().clone() : src;
  const Tensor value = from.dtype() == dst.dtype() ? from.detach() : from.detach().to(dst.dtype());
  const Shape sv = broadcast_strides(value.shape(), value.strides(), shape);
  dispatch_all(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* pd = dst.data<T>();
    const T* pv = value.data<T>();
    for_each_offset<2>(shape, {&dst.strides(), &sv}, [&](const auto& o) { pd[o[0]] = pv[o[1]]; });
  });
  dst.impl().storage->bump_version();
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  const int64_t d = normalize_dim("split", dim, x.dim());
  int64_t total = 0;
  for (int64_t s : sizes) {
    TG_CHECK(s >= 0, "split: negative size in {}", sizes);
    total += s;
  }
  TG_CHECK(total == x.shape()[d], "split: sizes {} add up to {}, but dim {} of shape {} is {}",
           sizes, total, dim, x.shape(), x.shape()[d]);
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t s : sizes) {
    parts.push_back(slice(x, d, start, start + s));
    start += s;
  }
  return parts;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  TG_CHECK(chunks > 0, "chunk: chunks must be positive, got {}", chunks);
  const int64_t n = x.shape()[normalize_dim("chunk", dim, x.dim())];
  const int64_t step = std::max<int64_t>(1, (n + chunks - 1) / chunks);
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < n; start += step) sizes.push_back(std::min(step, n - start));
  return split(x, sizes, dim);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  return run_op(op_name("expand"), [&] {
    TG_CHECK(broadcast_shapes("expand", x.shape(), shape) == shape,
             "expand: shape {} does not broadcast to {}", x.shape(), shape);
    Tensor out = empty(shape, x.dtype());
    dispatch_all(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      copy_strided(out.data<T>(), out.strides(), x.data<T>(),
                   broadcast_strides(x.shape(), x.strides(), shape), shape, false);
    });
    if (!recording(x)) return out;
    // dx = dout summed over the dims x was broadcast along
    const auto backward = [x_shape = x.shape()](const Tensor& dout, Grads& g) {
      g.pass(0, sum_to(dout, x_shape).contiguous());
    };
    return record(op_name("expand"), {x}, out, {.backward = backward});
  });
}

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  return run_op(op_name("concat"), [&] {
    TG_CHECK(!xs.empty(), "concat: no tensors given");
    const Tensor& first = xs.front();
    const int64_t d = normalize_dim("concat", dim, first.dim());
    Shape shape = first.shape();
    shape[d] = 0;
    for (const Tensor& x : xs) {
      TG_CHECK(x.dtype() == first.dtype(), "concat: dtypes differ: {} and {}", first.dtype(),
               x.dtype());
      Shape a = x.shape(), b = first.shape();
      TG_CHECK(a.size() == b.size() && (a[d] = b[d] = 0, a == b),
               "concat: shapes {} and {} differ outside dim {}", first.shape(), x.shape(), dim);
      shape[d] += x.shape()[d];
    }
    Tensor out = empty(shape, first.dtype());
    std::vector<int64_t> starts;
    int64_t start = 0;
    for (const Tensor& x : xs) {
      starts.push_back(start);
      dispatch_all(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        copy_strided(out.data<T>() + start * out.strides()[d], out.strides(), x.data<T>(),
                     x.strides(), x.shape(), false);
      });
      start += x.shape()[d];
    }
    if (!recording(xs)) return out;
    // d_i = dout[.., start_i : start_i + n_i, ..]
    return record(op_name("concat"), xs, out,
                  {.backward = [d, starts](const Tensor& dout, Grads& g) {
                    for (size_t i = 0; i < starts.size(); ++i) {
                      const int64_t end = i + 1 < starts.size() ? starts[i + 1] : dout.shape()[d];
                      if (g.wants(i)) g.pass(i, slice(dout, d, starts[i], end));
                    }
                  }});
  });
}

}  // namespace tapegrad
