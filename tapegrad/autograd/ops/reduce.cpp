// Reduction kernels. A reduction is planned once: the kept shape (reduced dims set to 1) and,
// for every input element, the offset of the output element it folds into, as strides with 0
// on the reduced dims. Forward folds x into out along that map; sum's backward reads it the
// other way, broadcasting dout back over x.
#include "tapegrad/autograd/ops/reduce.h"

#include <cmath>
#include <limits>

#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/registry.h"
#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/autograd/strided.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/autograd/threads.h"

namespace tapegrad {

namespace {

struct Plan {
  Shape out_shape;    // the result's shape (reduced dims dropped unless keepdim)
  Shape map_strides;  // x's shape -> offset in the (contiguous) output
  int64_t count;      // input elements folded into each output element
  // The reduced dims are the last ones (a full sum, a mean over the last dim): in a contiguous
  // x, each output element then folds a contiguous run of `count` elements.
  bool suffix;
};

Plan plan(const char* op, const Shape& shape, const std::vector<int64_t>& dims, bool keepdim) {
  const auto rank = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(rank, dims.empty());
  for (int64_t d : dims) {
    const int64_t nd = normalize_dim(op, d, rank);
    TG_CHECK(!reduced[nd], "{}: dim {} given twice in {}", op, d, dims);
    reduced[nd] = true;
  }
  Shape kept = shape;
  Plan p;
  p.count = 1;
  p.suffix = true;
  bool reduced_before = false;  // a reduced dim of more than one element came already
  for (int64_t d = 0; d < rank; ++d) {
    if (shape[d] > 1) {
      if (!reduced[d] && reduced_before) p.suffix = false;
      reduced_before = reduced_before || reduced[d];
    }
    if (reduced[d]) {
      p.count *= shape[d];
      kept[d] = 1;
    }
    if (!reduced[d] || keepdim) p.out_shape.push_back(kept[d]);
  }
  p.map_strides = broadcast_strides(kept, contiguous_strides(kept), shape);
  return p;
}

// x's shape with the reduced dims of the plan as size 1: the output's shape under keepdim.
Shape kept_shape(const Shape& shape, const Plan& p) {
  Shape kept = shape;
  for (size_t d = 0; d < kept.size(); ++d) {
    if (p.map_strides[d] == 0) kept[d] = 1;
  }
  return kept;
}

// acc[i] = the sum of x over the plan for output i, in double so float32 sums over long rows
// keep their precision. With the reduced dims last in a contiguous x, they are sums of runs of
// `count`, which the fast room's kernel adds where it runs.
template <class T>
void sum_into(std::vector<double>& acc, const Tensor& x, const Plan& p) {
  const FastOps* fast = fast_ops();
  if (fast && p.suffix && x.is_contiguous() && p.count > 0) {
    fast->run_sums(x, static_cast<int64_t>(acc.size()), p.count, acc.data());
  } else {
    const T* px = x.data<T>();
    for_each_offset<2>(x.shape(), {&p.map_strides, &x.strides()},
                       [&](const auto& o) { acc[o[0]] += px[o[1]]; });
  }
}

// out = scale * sum of x over the plan; backward: dx += scale * dout broadcast back.
Tensor scaled_sum(const char* op, const Tensor& x, const Plan& p, double scale) {
  return run_op(op, [&] {
    Tensor out = empty(p.out_shape, x.dtype());
    dispatch_floating(op, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      std::vector<double> acc(out.numel(), 0.0);
      sum_into<T>(acc, x, p);
      T* po = out.data<T>();
      for (size_t i = 0; i < acc.size(); ++i) po[i] = static_cast<T>(acc[i] * scale);
    });
    if (!recording(x)) return out;
    // dx = scale * dout, its reduced dims put back as size 1, broadcast to x's shape
    return record(op, {x}, out,
                  {.backward = [kept = kept_shape(x.shape(), p), x_shape = x.shape(), scale](
                                   const Tensor& dout, Grads& g) {
                    g.pass(0, mul(expand(reshape(dout, kept), x_shape), scale));
                  }});
  });
}

// For each output element, the flat index in x (contiguous) of its first largest value.
template <class T>
std::vector<int64_t> argmax_flat(const char* op, const Tensor& x, const Plan& p) {
  TG_CHECK(p.count > 0, "{}: cannot reduce over an empty dim of shape {}", op, x.shape());
  const int64_t n_out = numel(p.out_shape);
  std::vector<int64_t> best(n_out, -1);
  const T* px = x.data<T>();
  const Shape contiguous = contiguous_strides(x.shape());
  for_each_offset<2>(x.shape(), {&p.map_strides, &contiguous}, [&](const auto& o) {
    int64_t& b = best[o[0]];
    const T v = px[o[1]];
    if (b < 0 || v > px[b] || (std::isnan(v) && !std::isnan(px[b]))) b = o[1];
  });
  return best;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return scaled_sum(op_name("sum"), x, plan("sum", x.shape(), dims, keepdim), 1.0);
}

// mean = sum / count; d mean / dx = 1 / count
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const Plan p = plan("mean", x.shape(), dims, keepdim);
  TG_CHECK(p.count > 0, "mean: cannot average over an empty dim of shape {}", x.shape());
  return scaled_sum(op_name("mean"), x, p, 1.0 / static_cast<double>(p.count));
}

Tensor max(const Tensor& input, const std::vector<int64_t>& dims, bool keepdim) {
  return run_op(op_name("max"), [&] {
    const Tensor x = input.contiguous();
    const Plan p = plan("max", x.shape(), dims, keepdim);
    Tensor out = empty(p.out_shape, x.dtype());
    std::vector<int64_t> index;
    dispatch_floating("max", x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      index = argmax_flat<T>("max", x, p);
      const T* px = x.data<T>();
      T* po = out.data<T>();
      for (size_t i = 0; i < index.size(); ++i) po[i] = px[index[i]];
    });
    if (!recording(x)) return out;
    // dx = dout at each winning position, 0 elsewhere: only the winner moves the max
    Tensor won = zeros(x.shape(), DType::Bool);
    for (const int64_t i : index) won.data<bool>()[i] = true;
    return record(op_name("max"), {x}, out,
                  {.backward =
                       [won, kept = kept_shape(x.shape(), p)](const Tensor& dout, Grads& g) {
                         const Tensor spread = expand(reshape(dout, kept), won.shape());
                         g.pass(0, where(won, spread, zeros_like(spread)));
                       }},
                  {{"won", won}});
  });
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  TG_CHECK(broadcast_shapes("sum_to", shape, x.shape()) == x.shape(),
           "sum_to: shape {} does not broadcast to the input's shape {}", shape, x.shape());
  if (x.shape() == shape) return x;
  const auto lead = static_cast<int64_t>(x.shape().size() - shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && x.shape()[d] != 1)) dims.push_back(d);
  }
  return dims.empty() ? reshape(x, shape) : reshape(sum(x, dims, true), shape);
}

Tensor argmax(const Tensor& input, int64_t dim, bool keepdim) {
  const Tensor x = input.contiguous();
  const int64_t d = normalize_dim("argmax", dim, x.dim());
  const Plan p = plan("argmax", x.shape(), {d}, keepdim);
  Tensor out = empty(p.out_shape, DType::Int64);
  // flat index -> index along d
  const int64_t inner = contiguous_strides(x.shape())[d];
  const int64_t extent = x.shape()[d];
  dispatch_floating("argmax", x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const std::vector<int64_t> flat = argmax_flat<T>("argmax", x, p);
    int64_t* po = out.data<int64_t>();
    for (size_t i = 0; i < flat.size(); ++i) po[i] = (flat[i] / inner) % extent;
  });
  return out;
}

}  // namespace tapegrad
