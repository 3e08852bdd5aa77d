// The library's ops in one place: their list, and the door between the two rooms.
//
// kOps names each op a user calls and says how its derivative is defined, which is how it is
// tested: tests/autograd/test_registry.cpp walks the list and fails on an op without a case, so
// no op skips the fast-equals-reference, gradgradcheck and autocast tests; an op's name reaches
// the tape and the profile only through op_name, which does not compile for a name the list
// lacks.
//
// An op that has a faster implementation in the fast room (tapegrad/autograd/fast/) names its
// slot in FastOps and runs it when fast_ops() gives a table; otherwise it runs its plain kernel,
// or its reference. Each fast op records the same derivative as the op it speeds up, with its
// own kernels beside it, and the registry test holds the two equal. fast_ops() is null in the
// learner's edition (-DTAPEGRAD_FAST=OFF), which has no fast room, and under a
// ReferenceModeGuard.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "tapegrad/autograd/ops/attention.h"
#include "tapegrad/autograd/ops/layernorm.h"
#include "tapegrad/autograd/ops/loss.h"
#include "tapegrad/autograd/ops/matmul.h"
#include "tapegrad/autograd/tape.h"
#include "tapegrad/profile/profile.h"

namespace tapegrad {

enum class OpKind {
  Primitive,   // a plain kernel and its one backward, in differentiable ops, side by side
  Composite,   // defined by a reference in primitives (*_reference); the fast room fuses it
  Composed,    // written in other ops, recording nothing of its own (reshape, split)
  NoGradient,  // comparisons and indices: the output never requires grad
};

// Each kind's ops by name, a space either side of each: the function, and what the tape and the
// profile show. The primitives of elementwise.h, reduce.h, shape_ops.h (Tensor's copies too),
// matmul.h, softmax.h, embedding.h and dropout.h; the composites of matmul.h, layernorm.h,
// attention.h and loss.h.
inline constexpr std::pair<OpKind, std::string_view> kOps[] = {
    {OpKind::Primitive,
     " add sub mul div neg exp log sqrt tanh relu gelu erf pow sin cos masked_fill where "
     "sum mean max view unsqueeze squeeze permute slice expand concat to clone contiguous "
     "matmul softmax log_softmax masked_softmax embedding embedding_backward dropout "},
    {OpKind::Composite,
     " linear layer_norm add_layer_norm add_and_layer_norm attention cross_entropy "},
    {OpKind::Composed, " tril triu gelu_slope sum_to reshape transpose split chunk "},
    {OpKind::NoGradient, " eq ne lt le gt ge floor_divide logical_or argmax "},
};

// `name`, checked to be an op of kOps: every name an op of the library records on the tape or
// opens a profile scope with is written op_name("..."), so a name the list lacks stops the
// compilation here.
consteval const char* op_name(const char* name) {
  const std::string_view n(name);
  for (const auto& [kind, names] : kOps) {
    for (size_t at = names.find(n); at != names.npos; at = names.find(n, at + 1))
      if (names[at - 1] == ' ' && names[at + n.size()] == ' ') return name;
  }
  throw "op_name: no such op in kOps (tapegrad/autograd/ops/registry.h): list it there";
}

// Each takes its op's arguments, checked by the op, with a dropout's mask given by its key.
struct FastOps {
  Tensor (*matmul)(const Tensor& a, const Tensor& b);
  Tensor (*linear)(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation activation,
                   double p, uint64_t key);
  Tensor (*layer_norm)(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
  // add_layer_norm (keep_sum false: the norm only) and add_and_layer_norm, named `op`
  SumNorm (*add_norm)(const char* op, const Tensor& x, const Tensor& d, const Tensor& weight,
                      const Tensor& bias, double eps, double p, uint64_t key, bool keep_sum);
  Tensor (*attention)(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                      const Tensor& blocked, double p, uint64_t key, Tensor* weights);
  Tensor (*cross_entropy)(const Tensor& logits, const Tensor& targets,
                          const CrossEntropyOptions& options);
  // softmax and log_softmax
  Tensor (*softmax)(const char* op, const Tensor& x, int64_t dim, bool log);
  Tensor (*masked_softmax)(const Tensor& x, const Tensor& mask);
  // sum and mean over the last dims of a contiguous x: sums[i] = the sum of the run
  // x[i * count, (i + 1) * count), in double, for i < rows
  void (*run_sums)(const Tensor& x, int64_t rows, int64_t count, double* sums);
};

// The derivatives of primitives the fast room computes, which it records beside its kernels
// (defined in ops/*.cpp, each in terms of what it captures: matmul's inputs, softmax's output
// y, detached).
BackwardFn matmul_backward(const Tensor& a, const Tensor& b);
BackwardFn softmax_backward(const Tensor& y, int64_t dim, bool log);

// What the build linked: the fast room's table (fast/fast_ops.cpp) or null
// (learner_edition.cpp).
const FastOps* installed_fast_ops();

// The fast room's ops where they may run, or null (the learner's edition, or a
// ReferenceModeGuard).
inline const FastOps* fast_ops() { return reference_mode() ? nullptr : installed_fast_ops(); }

// Every op enters through run_op, which opens its profile scope. An op with a slot in the fast
// room, its arguments checked, then runs the fast room's kernel in `slot` where the fast room
// runs, else `plain` (the op's plain kernel, which records it, or its reference).
template <class Slot, class Plain, class... Args>
auto run_op(const char* op, Slot FastOps::*slot, Plain&& plain, const Args&... args) {
  const profile::Scope profile_scope(op);
  if (const FastOps* fast = fast_ops()) return (fast->*slot)(args...);
  return plain(args...);
}

// An op the fast room does not speed up runs its body: the checks, the kernel and the record.
template <class Body>
auto run_op(const char* op, Body&& body) {
  const profile::Scope profile_scope(op);
  return body();
}

}  // namespace tapegrad
