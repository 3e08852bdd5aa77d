// Matrix products. matmul is a primitive: one BLAS product per batch item, and its one
// backward, da = dout b^T and db = a^T dout, itself two products in the precision the forward
// ran in (under an AutocastGuard, bfloat16 operands: tape.h). linear is a composite, defined by
// linear_reference (x @ w^T + b, then its epilogue). The fast room computes both on its own gemm
// (fast/matmul.cpp).
#include "tapegrad/autograd/ops/matmul.h"

#include <cblas.h>

#include <span>
#include <type_traits>

#include "tapegrad/autograd/ops/dropout.h"
#include "tapegrad/autograd/ops/elementwise.h"
#include "tapegrad/autograd/ops/reduce.h"
#include "tapegrad/autograd/ops/registry.h"
#include "tapegrad/autograd/ops/shape_ops.h"
#include "tapegrad/autograd/strided.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/profile/profile.h"

namespace tapegrad {

namespace {

// An operand as BLAS reads it: contiguous, and in Precision::BFloat16 (a float32 operand)
// rounded to bfloat16, as the product reads it.
Tensor blas_operand(const Tensor& x, Precision precision) {
  if (precision != Precision::BFloat16 || x.dtype() != DType::Float32) return x.contiguous();
  Tensor t = x.contiguous().clone();
  for (float& v : std::span(t.data<float>(), static_cast<size_t>(t.numel()))) v = round_to_bf16(v);
  return t;
}

// a [..., M, K] @ b [..., K, N], the batch dims broadcast: one BLAS product (cblas_sgemm or
// cblas_dgemm, out = a b) per batch item. Not recorded.
Tensor plain_matmul(const char* op, const Tensor& a_in, const Tensor& b_in, Precision precision) {
  const auto batch_of = [](const Shape& s) { return Shape(s.begin(), s.end() - 2); };
  const Shape batch = broadcast_shapes(op, batch_of(a_in.shape()), batch_of(b_in.shape()));
  const int64_t M = a_in.size(-2), K = a_in.size(-1), N = b_in.size(-1);
  Shape out_shape = batch;
  out_shape.insert(out_shape.end(), {M, N});
  Tensor out = zeros(out_shape, a_in.dtype());
  if (M == 0 || N == 0 || K == 0) return out;
  const Tensor a = blas_operand(a_in, precision), b = blas_operand(b_in, precision);
  // each operand's batch strides seen from the broadcast batch shape
  const auto strides_of = [&](const Tensor& t) {
    return broadcast_strides(batch_of(t.shape()), batch_of(t.strides()), batch);
  };
  const Shape sa = strides_of(a), sb = strides_of(b), sc = strides_of(out);
  dispatch_floating(op, a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *pa = a.data<T>(), *pb = b.data<T>();
    T* pc = out.data<T>();
    for_each_offset<3>(batch, {&sa, &sb, &sc}, [&](const auto& o) {
      if constexpr (std::is_same_v<T, float>) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, pa + o[0], K, pb + o[1],
                    N, 0, pc + o[2], N);
      } else {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, pa + o[0], K, pb + o[1],
                    N, 0, pc + o[2], N);
      }
    });
  });
  return out;
}

}  // namespace

BackwardFn matmul_backward(const Tensor& a, const Tensor& b) {
  return [a, b](const Tensor& dout, Grads& g) {
    // da = dout b^T, db = a^T dout, each summed over the batch dims it was broadcast along
    if (g.wants(0)) g.pass(0, sum_to(matmul(dout, transpose(b, -2, -1)), a.shape()));
    if (g.wants(1)) g.pass(1, sum_to(matmul(transpose(a, -2, -1), dout), b.shape()));
  };
}

// matmul's plain path: the plain kernel, and the op recorded with its derivative.
Tensor recorded_matmul(const Tensor& a, const Tensor& b) {
  Tensor out = plain_matmul("matmul", a, b, product_precision(a.dtype()));
  profile::note_flops(2.0 * static_cast<double>(out.numel()) * static_cast<double>(a.size(-1)));
  if (!recording(a, b)) return out;
  return record(op_name("matmul"), {a, b}, out, {.backward = matmul_backward(a, b)},
                {{"a", a}, {"b", b}});
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  TG_CHECK(a_in.dim() >= 2 && b_in.dim() >= 2,
           "matmul: operands need rank >= 2, got shapes {} and {}", a_in.shape(), b_in.shape());
  TG_CHECK(a_in.dtype() == b_in.dtype(), "matmul: dtypes differ: {} and {}", a_in.dtype(),
           b_in.dtype());
  TG_CHECK(a_in.size(-1) == b_in.size(-2), "matmul: inner dimensions differ: {} and {}",
           a_in.shape(), b_in.shape());
  return run_op(op_name("matmul"), &FastOps::matmul, recorded_matmul, a_in, b_in);
}

Tensor linear(const Tensor& x_in, const Tensor& weight, const Tensor& bias,
              const LinearEpilogue& epilogue) {
  TG_CHECK(x_in.dim() >= 1, "linear: input must have rank >= 1, got shape {}", x_in.shape());
  TG_CHECK(weight.dim() == 2 && weight.size(1) == x_in.size(-1),
           "linear: weight must be [OC, {}] for input {}, got {}", x_in.size(-1), x_in.shape(),
           weight.shape());
  TG_CHECK(!bias.defined() || bias.shape() == Shape{weight.size(0)},
           "linear: bias must be [{}] for weight {}, got {}", weight.size(0), weight.shape(),
           bias.shape());
  TG_CHECK(x_in.dtype() == weight.dtype() && (!bias.defined() || bias.dtype() == x_in.dtype()),
           "linear: dtypes differ: input {}, weight {}{}", x_in.dtype(), weight.dtype(),
           bias.defined() ? fmt::format(", bias {}", bias.dtype()) : "");
  const auto [p, key] = draw_dropout("linear", epilogue.dropout, "epilogue.dropout");
  return run_op(op_name("linear"), &FastOps::linear, linear_reference, x_in, weight, bias,
                epilogue.activation, p, key);
}

Tensor linear_reference(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        Activation activation, double p, uint64_t key) {
  const int64_t C = weight.size(1), OC = weight.size(0);
  Shape out_shape = x.shape();
  out_shape.back() = OC;
  const int64_t N = numel(Shape(x.shape().begin(), x.shape().end() - 1));
  Tensor h = reshape(matmul(reshape(x, {N, C}), transpose(weight, 0, 1)), out_shape);
  if (bias.defined()) h = h + bias;
  if (activation == Activation::ReLU) h = relu(h);
  if (activation == Activation::GELU) h = gelu(h);
  return dropout(h, p, key);
}

Tensor matmul_reference(const Tensor& a, const Tensor& b) {
  TG_CHECK(a.dim() >= 2 && b.dim() >= 2 && a.size(-1) == b.size(-2),
           "matmul_reference: cannot multiply shapes {} and {}", a.shape(), b.shape());
  return plain_matmul("matmul_reference", a, b, Precision::Float32);
}

}  // namespace tapegrad
