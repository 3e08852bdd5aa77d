// The derivations of docs/ as numbers: for each op family, a small float64 example whose
// gradient is computed three ways: by the tape as this build runs it (the fast room's fused
// kernel, where it has one), by the tape under a ReferenceModeGuard (the op's one backward, or
// the walk differentiating its reference, which the chapter quotes), and by central
// differences of the forward alone. Exits 1 when the tape and the reference differ by more
// than 1e-12, or the tape and the differences by more than 1e-8.
//
//   ./build/examples/derivations [--chapter layernorm|softmax|cross_entropy|attention|
//                                           embedding|dropout|gradcheck]   (default: all)
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "examples/cli.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/check/gradcheck.h"

using namespace tapegrad;

namespace {

using Vec = std::vector<double>;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor f64(const Vec& values, const Shape& shape) {
  return tensor(std::span<const double>(values), shape, DType::Float64);
}

std::string show(const Tensor& t) {
  const Vec v = t.contiguous().to_vector<double>();
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += fmt::format("{}{:.6f}", i ? ", " : "", v[i]);
  return out + "]";
}

double largest_difference(const Tensor& a, const Tensor& b) {
  const Vec x = a.to_vector<double>(), y = b.to_vector<double>();
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
  return d;
}

bool failed = false;

// The gradients of <dout, f(inputs)> with respect to the inputs, by the tape; under a
// ReferenceModeGuard when `reference`.
std::vector<Tensor> tape_grads(const Fn& f, const std::vector<Tensor>& inputs, const Tensor& dout,
                               bool reference) {
  std::vector<Tensor> leaves;
  for (const Tensor& in : inputs) leaves.push_back(in.clone().set_requires_grad(true));
  if (reference) {
    const ReferenceModeGuard plain;
    f(leaves).backward(dout);
  } else {
    f(leaves).backward(dout);
  }
  std::vector<Tensor> grads;
  for (const Tensor& l : leaves) grads.push_back(l.grad());
  return grads;
}

// Input i's gradient of <dout, f(inputs)> by central differences, h = 1e-6.
Tensor numeric_grad(const Fn& f, const std::vector<Tensor>& inputs, size_t i, const Tensor& dout) {
  const NoGradGuard no_grad;
  const auto at = [&](int64_t j, double h) {
    std::vector<Tensor> moved = inputs;
    moved[i] = inputs[i].clone();
    double* p = moved[i].data<double>();
    p[j] += h;
    return sum(f(moved) * dout).item();
  };
  Tensor g = zeros(inputs[i].shape(), DType::Float64);
  for (int64_t j = 0; j < g.numel(); ++j) {
    g.data<double>()[j] = (at(j, 1e-6) - at(j, -1e-6)) / 2e-6;
  }
  return g;
}

// Prints each named input's gradient three ways and how far apart they are.
void compare(const Fn& f, const std::vector<Tensor>& inputs, const std::vector<std::string>& names,
             const Tensor& dout, bool numeric = true) {
  const std::vector<Tensor> tape = tape_grads(f, inputs, dout, false);
  const std::vector<Tensor> reference = tape_grads(f, inputs, dout, true);
  for (size_t i = 0; i < names.size(); ++i) {
    const double to_reference = largest_difference(tape[i], reference[i]);
    fmt::print("  {:<8} tape      {}\n  {:<8} reference {}\n", names[i], show(tape[i]), "",
               show(reference[i]));
    std::string differences = fmt::format("reference {:.1e}", to_reference);
    failed = failed || to_reference > 1e-12;
    if (numeric) {
      const Tensor n = numeric_grad(f, inputs, i, dout);
      const double to_numeric = largest_difference(tape[i], n);
      fmt::print("  {:<8} numeric   {}\n", "", show(n));
      differences += fmt::format(", numeric {:.1e}", to_numeric);
      failed = failed || to_numeric > 1e-8;
    }
    fmt::print("  {:<8} largest difference from the tape: {}\n", "", differences);
  }
}

void layernorm() {
  fmt::print("layer norm, one row x = [1, 2, 4, 7], gamma = [1, 0.5, -1, 2], beta = 0, ");
  fmt::print("dy = [0.1, -0.2, 0.3, 0.4]\n");
  compare([](const auto& in) { return layer_norm(in[0], in[1], in[2], 1e-5); },
          {f64({1, 2, 4, 7}, {1, 4}), f64({1, 0.5, -1, 2}, {4}), zeros({4}, DType::Float64)},
          {"dx", "dgamma", "dbeta"}, f64({0.1, -0.2, 0.3, 0.4}, {1, 4}));
}

void softmax_chapter() {
  fmt::print("softmax and log_softmax of x = [1, 2, 3, -1], dy = [0.5, -1, 0.25, 2]\n");
  const Tensor x = f64({1, 2, 3, -1}, {4}), dy = f64({0.5, -1, 0.25, 2}, {4});
  compare([](const auto& in) { return softmax(in[0], 0); }, {x}, {"softmax"}, dy);
  compare([](const auto& in) { return log_softmax(in[0], 0); }, {x}, {"log"}, dy);
  fmt::print("a row of -inf (every position masked): zeros out, no gradient\n");
  compare([](const auto& in) { return log_softmax(in[0], 0); },
          {full({4}, -INFINITY, DType::Float64)}, {"all -inf"}, dy, /*numeric=*/false);
}

void cross_entropy_chapter() {
  fmt::print("cross-entropy, logits [[2, 1, 0.1], [0.5, 2.5, -1], [1, 1, 1]], targets [0, 1, ");
  fmt::print("ignored], label smoothing 0.1\n");
  const Tensor targets = tensor({0, 1, -100}, {3}, DType::Int64);
  const Fn loss = [targets](const auto& in) {
    return cross_entropy(in[0], targets, {.ignore_index = -100, .label_smoothing = 0.1});
  };
  const Tensor z = f64({2, 1, 0.1, 0.5, 2.5, -1, 1, 1, 1}, {3, 3});
  fmt::print("  loss     {:.6f}\n", loss({z}).item());
  compare(loss, {z}, {"dlogits"}, ones({}, DType::Float64));
}

void attention_chapter() {
  fmt::print("attention, one head: q [2, 2], k and v [3, 2], key 2 blocked for query 0, dO all ");
  fmt::print("ones\n");
  Tensor mask = zeros({2, 3}, DType::Bool);
  mask.set({0, 2}, 1);
  compare([mask](const auto& in) { return attention(in[0], in[1], in[2], 1, {.blocked = mask}); },
          {f64({1, 0, 0.5, -1}, {1, 2, 2}), f64({1, 2, -1, 0.5, 0, 1}, {1, 3, 2}),
           f64({1, 0, 0, 3, 2, 2}, {1, 3, 2})},
          {"dq", "dk", "dv"}, ones({1, 2, 2}, DType::Float64));
}

void embedding_chapter() {
  fmt::print("embedding, W [4, 2], ids [1, 3, 1, 0], dout rows [1, 2], [3, 4], [5, 6], [7, 8]\n");
  const Tensor ids = tensor({1, 3, 1, 0}, {4}, DType::Int64);
  const std::vector<Tensor> w = {f64({0, 0, 1, 1, 2, 2, 3, 3}, {4, 2})};
  const Tensor dout = f64({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  compare([ids](const auto& in) { return embedding(in[0], ids); }, w, {"dW"}, dout);
  fmt::print("with padding id 0: its row gets no gradient, by convention (not the derivative)\n");
  compare([ids](const auto& in) { return embedding(in[0], ids, 0); }, w, {"dW"}, dout,
          /*numeric=*/false);
}

void dropout_chapter() {
  fmt::print("dropout p = 0.5 on eight ones, dy = 1: the kept positions get 1 / (1 - p) = 2\n");
  const uint64_t key = Generator(3).next_u64();  // one mask, drawn again by every call
  const Fn drop = [key](const auto& in) { return dropout(in[0], 0.5, key); };
  const Tensor x = ones({8}, DType::Float64);
  fmt::print("  y        {}\n", show(drop({x})));
  compare(drop, {x}, {"dx"}, ones({8}, DType::Float64));
}

// gradcheck: each element's analytic gradient against the central difference
// (f(x + h) - f(x - h)) / 2h of the scalar sum(R * f(x)), R a fixed random tensor.
void gradcheck_chapter() {
  fmt::print("gradcheck of x * x, right and with the backward off by 0.1 at element 3\n");
  const Tensor x = f64({0.5, -1, 2, 3}, {4}).set_requires_grad(true);
  const GradcheckFn square = [](const std::vector<Tensor>& in) { return mul(in[0], in[0]); };
  fmt::print("  right:  {}\n", gradcheck(square, {x}).message());
  // the same op with a backward that is wrong at element 3, recorded by hand
  const GradcheckFn wrong = [](const std::vector<Tensor>& in) {
    const Tensor xd = in[0].detach();
    Tensor y = mul(xd, xd);
    if (recording(in[0])) {
      record("square_off", {in[0]}, y, {.backward = [xd](const Tensor& dout, Grads& g) {
               g.pass(0, dout * (xd * 2 + f64({0, 0, 0, 0.1}, {4})));
             }});
    }
    return y;
  };
  fmt::print("  wrong:  {}\n", gradcheck(wrong, {x}).message());
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("derivations", [&] {
    examples::Flags f(argc, argv,
                      "derivations: each chapter's gradient by the tape, by the reference and by "
                      "central differences\nusage: derivations [--chapter NAME]");
    const std::string chapter = f.text(
        "chapter", "all",
        "layernorm, softmax, cross_entropy, attention, embedding, dropout, gradcheck or all");
    if (!f.finish()) return 0;
    const std::vector<std::pair<std::string, std::function<void()>>> chapters{
        {"layernorm", layernorm},
        {"softmax", softmax_chapter},
        {"cross_entropy", cross_entropy_chapter},
        {"attention", attention_chapter},
        {"embedding", embedding_chapter},
        {"dropout", dropout_chapter},
        {"gradcheck", gradcheck_chapter}};
    bool found = false;
    for (const auto& [name, run] : chapters) {
      if (chapter != "all" && chapter != name) continue;
      found = true;
      run();
    }
    if (!found) throw examples::FlagError("--chapter: no chapter '" + chapter + "'");
    if (failed) {
      fmt::print(stderr, "derivations: the tape, the reference and the differences disagree\n");
      return 1;
    }
    return 0;
  });
}
