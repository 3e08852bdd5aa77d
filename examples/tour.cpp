// A tour of the engine: build a graph, draw its tape, run backward, read the gradients, check
// them against finite differences, then train a two-layer network on XOR with plain gradient
// descent.
//
//   ./build/examples/tour [--draw DIR]     (DIR/tape.svg, DIR/tape.dot: the tape of step 1)
#include <fmt/core.h>

#include <filesystem>

#include "examples/cli.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/check/gradcheck.h"
#include "tapegrad/io/files.h"
#include "tapegrad/train/run.h"
#include "tapegrad/viz/print.h"
#include "tapegrad/viz/tape_drawing.h"

using namespace tapegrad;

namespace {

int tour(const std::string& draw_dir) {
  // 1. A small graph: y = sum(tanh(x @ w + b)). Each op records one entry on the tape; leaves
  // that require grad get a .grad().
  Generator gen(0);
  Tensor x = tensor({1, 2, 3, 4}, {2, 2});
  Tensor w = normal({2, 3}, 0.0, 0.5, gen).set_requires_grad(true);
  Tensor b = zeros({3}).set_requires_grad(true);
  Tensor h, y;
  {
    const TapeDetailsGuard details;  // entries keep their inputs' shapes and what they saved
    h = tanh(matmul(x, w) + b);
    y = sum(h);
  }
  fmt::print("x = {}\nw = {}\nh = {}\ny = {}\n\n", x, w, h, y);

  // The tape, drawn before backward releases it; its hooks note each gradient's norm.
  viz::TapeDrawing drawing({{"y", y}, {"w", w}, {"b", b}, {"h", h}});
  fmt::print("the tape, in recording order:\n");
  for (size_t i = 0; i < drawing.steps().size(); ++i) {
    const auto& step = drawing.steps()[i];
    std::string saved;
    for (const SavedBuffer& s : step.saved) saved += fmt::format(" {} {}", s.name, s.shape);
    const auto& out = drawing.values()[step.outputs.front()];
    fmt::print("  #{} {:<7} -> {:<10} saved:{}\n", i, step.op,
               fmt::format("{} {}", out.label, out.shape), saved.empty() ? " nothing" : saved);
  }
  fmt::print("  {} bytes saved for backward\n\n", drawing.saved_bytes());

  y.backward();  // walks the tape in reverse; dy/dw and dy/db accumulate into the leaves
  fmt::print("dy/dw = {}\ndy/db = {}\n\n", w.grad(), b.grad());
  if (!draw_dir.empty()) {
    train::claim_output_folder(draw_dir, {"tape.svg", "tape.dot"});
    io::write_atomic(draw_dir + "/tape.svg", drawing.svg());
    io::write_atomic(draw_dir + "/tape.dot", drawing.dot());
    fmt::print(
        "the tape drawn, with gradient norms: {0}/tape.svg (a browser), {0}/tape.dot "
        "(dot -Tsvg)\n\n",
        draw_dir);
  }

  // 2. gradcheck compares the tape's gradients with central differences, in float64.
  Tensor w64 = w.detach().to(DType::Float64).set_requires_grad(true);
  Tensor b64 = b.detach().to(DType::Float64).set_requires_grad(true);
  const Tensor x64 = x.to(DType::Float64);
  const GradcheckResult check = gradcheck(
      [&](const std::vector<Tensor>& in) { return tanh(matmul(x64, in[0]) + in[1]); }, {w64, b64});
  fmt::print("gradcheck of tanh(x @ w + b): {}\n\n", check.message());

  // 3. Learn XOR with a 2-8-1 network, cross-entropy over two classes, gradient descent.
  const Tensor inputs = tensor({0, 0, 0, 1, 1, 0, 1, 1}, {4, 2});
  const Tensor labels = tensor({0, 1, 1, 0}, {4}, DType::Int64);
  Tensor w1 = normal({2, 8}, 0.0, 1.0, gen).set_requires_grad(true);
  Tensor b1 = zeros({8}).set_requires_grad(true);
  Tensor w2 = normal({8, 2}, 0.0, 1.0, gen).set_requires_grad(true);
  Tensor b2 = zeros({2}).set_requires_grad(true);
  const float lr = 0.5f;
  for (int step = 0; step <= 500; ++step) {
    const Tensor logits = matmul(tanh(matmul(inputs, w1) + b1), w2) + b2;
    Tensor loss = cross_entropy(logits, labels);
    loss.backward();
    if (step % 100 == 0) {
      fmt::print("step {:3d}  loss {:.4f}  predictions {}\n", step, loss.item(), argmax(logits, 1));
    }
    NoGradGuard no_grad;  // the update itself is not part of any graph
    for (Tensor* p : {&w1, &b1, &w2, &b2}) {
      float* value = p->data<float>();
      const float* grad = p->grad().data<float>();
      for (int64_t i = 0; i < p->numel(); ++i) value[i] -= lr * grad[i];
      p->zero_grad();
    }
  }
  fmt::print("targets                         {}\n", labels);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main("tour", [&] {
    examples::Flags f(argc, argv,
                      "tour: the engine alone: a graph, its tape, its gradients, gradcheck, XOR\n"
                      "usage: tour [--draw DIR]");
    const std::string draw =
        f.text("draw", "", "write the tape of step 1 to DIR/tape.svg and .dot");
    if (!f.finish()) return 0;
    return tour(draw);
  });
}
